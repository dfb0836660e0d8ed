"""Filesystem figures for BENCHMARKS.md, interleaved: ext4, gocryptfs, memvault (and
a second memvault whose daemon keeps no audit trail: what the trail costs)
and the plain pyfuse3 + trio memfs (scripts/memfs.py, its reader tasks
taking turns as memvault's do: the floor of the binding; also with FLUSH
answered ENOSYS, and sealing and journaling every write, decrypting every
read, answering GETXATTR and fsync as memvault must: the floor of an
encrypted journaled design on this stack; and that floor with memvault's
further guarantees on each change: a wrapped key per file, the generation
sealed apart, the integrity sum, the audit trail, the
journal header rewritten) all
mounted at once, every phase run on each in turn, in an order that rotates
from round to round; medians over the rounds. The machine is shared:
same-run ratios hold where absolute times move.

Before every timed phase the run waits until no daemon is busy in the
background (memvault embeds what was written at idle priority once it is
quiet), or about to be (memvault's status still lists files to index or
shreds to compact: an idle CPU during its quiet wait does not mean done):
otherwise that work, on the same 2 cores, would slow whichever target is
measured next, the peers included. So each phase is timed on a
quiet machine, and memvault's background work shows in its CPU column
(the round total), not in anyone's times.

Per round: 2,000 Markdown files of 0.5-3 KB in 20 directories (create, ls
-lR, read all, grep -rl, append to 500, atomic-save 200, rm -rf), then one
100 MB file written and read back after dropping the page cache, then the
median of 1,000 cached open+read+close; after the rounds, the median time of
one change made alone, 2 ms after the last (a new file, an append, an atomic
save), as an agent writing now and then sees it. The daemon's CPU seconds during each
phase are printed beside (for memvault, background embedding included when
it ran in that window; the total per round is printed too). Last, per file
and small phase: the time gocryptfs takes beyond the bare binding (memfs
with FLUSH answered ENOSYS), which is all that a file system on this stack
may spend on its own work to match gocryptfs, beside what memvault and the
two floors spend beyond it.

Where the scheduler puts the daemons decides much of it (--placement): a
request and its reply each wake the other side, and waking a thread on an
idle core of a virtual machine costs more than a short handler. With every
daemon on the benchmark's own core (same), each phase costs what the
daemons' code costs; on the other core (split), what the wakeups cost; left
to the scheduler (free, the default), each daemon lands on one or the other
and may move between rounds, so its figures jump between the two. The run
says, per phase, in how many rounds each Python daemon served it on its
caller's CPU (its reader yielding the CPU to the caller between requests),
and a free run ends with the cached open+read+close measured both ways, to
show how far apart they are.

Usage: scripts/bench fs [--rounds 3] [--files 2000] [--big-mb 100] [--dir DIR]
                        [--placement free|same|split]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic import note  # noqa: E402

PASSPHRASE = "benchmark passphrase"
SMALL_PHASES = [
    "create",
    "ls -lR",
    "read all",
    "grep -rl",
    "append to 500",
    "atomic-save 200",
    "rm -rf",
]
BIG_PHASES = ["write {mb} MB", "read {mb} MB"]
LATENCY = "open+read+close, median µs"
BINDING = "memfs, FLUSH ENOSYS"
SEALED_FLOOR = "memfs, sealed + journaled"
GUARDED_FLOOR = "memfs, sealed + guarded"
APPENDED, SAVED = slice(0, 500), slice(500, 700)
"""The files appended to and atomically saved (the others: every file)."""
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Target:
    name: str
    root: Path
    pid: int | None  # the daemon, for its CPU time (None: the kernel's own ext4)
    pending: Callable[[], bool] = lambda: False
    """Background work the daemon has yet to start (memvault: embedding waits for
    its files to be quiet, so an idle CPU does not mean it is done)."""

    def cpu(self) -> float:
        if self.pid is None:
            return 0.0
        try:
            fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / TICKS

    def switches(self) -> tuple[int, int]:
        """The serving thread's voluntary and involuntary context switches so far."""
        if self.pid is None:
            return 0, 0
        try:
            status = Path(f"/proc/{self.pid}/task/{self.pid}/status").read_text()
        except OSError:
            return 0, 0
        counts = dict(line.split(":\t") for line in status.splitlines() if "ctxt_switches" in line)
        return int(counts["voluntary_ctxt_switches"]), int(counts["nonvoluntary_ctxt_switches"])


class Workload:
    """The same files and contents for every target."""

    def __init__(self, count: int, megabytes: int) -> None:
        rng = random.Random(5)
        self.names = [Path(f"d{i % 20:02d}") / f"note-{i:05d}.md" for i in range(count)]
        self.contents = [note(rng, rng.randint(500, 3000)) for _ in self.names]
        self.megabytes = megabytes
        self.chunk = os.urandom(1 << 20)

    def phase(self, name: str, base: Path) -> Callable[[], object]:
        files = [base / n for n in self.names]
        big = base / "big.bin"

        def create() -> None:
            for d in sorted({f.parent for f in files}):
                d.mkdir(parents=True)
            for path, data in zip(files, self.contents, strict=True):
                with open(path, "wb") as f:
                    f.write(data)

        def read_all() -> None:
            for path in files:
                with open(path, "rb") as f:
                    f.read()

        def append() -> None:
            for path in files[APPENDED]:
                with open(path, "ab") as f:
                    f.write(b"\n- appended line\n")

        def atomic_save() -> None:
            for path in files[SAVED]:
                tmp = path.with_name(f".{path.name}.tmp")
                with open(tmp, "wb") as f:
                    f.write(b"# rewritten\n" + os.urandom(8).hex().encode() * 60)
                    f.flush()
                    os.fsync(f.fileno())
                os.rename(tmp, path)

        def write_big() -> None:
            with open(big, "wb") as f:
                for _ in range(self.megabytes):
                    f.write(self.chunk)

        def read_big() -> None:
            with open(big, "rb") as f:
                while f.read(1 << 20):
                    pass

        def run(*cmd: str) -> Callable[[], object]:
            return lambda: subprocess.run(cmd, stdout=subprocess.DEVNULL, check=False)

        return {
            "create": create,
            "ls -lR": run("ls", "-lR", str(base)),
            "read all": read_all,
            "grep -rl": run("grep", "-rl", "ticket 4242", str(base)),
            "append to 500": append,
            "atomic-save 200": atomic_save,
            "rm -rf": run("rm", "-rf", *[str(base / f"d{i:02d}") for i in range(20)]),
            f"write {self.megabytes} MB": write_big,
            f"read {self.megabytes} MB": read_big,
        }[name]


def drop_caches() -> None:
    os.sync()
    with contextlib.suppress(OSError):  # not root: reads may come from the page cache
        Path("/proc/sys/vm/drop_caches").write_text("3\n")


def open_read_close(root: Path, n: int = 1000) -> float:
    path = root / "small.md"
    path.write_bytes(b"# small\n" + b"x" * 700)
    with open(path, "rb") as f:
        f.read()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        with open(path, "rb") as f:
            f.read()
        samples.append(time.perf_counter() - start)
    path.unlink()
    return statistics.median(samples) * 1e6


# -- the targets --------------------------------------------------------------------


def wait_mounted(mnt: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.ismount(mnt):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{mnt} did not mount")
        time.sleep(0.05)


@contextmanager
def memvault_mount(work: Path, audit: bool = True) -> Iterator[Target]:
    """memvault; without ``audit``, a second vault whose daemon records no audit
    trail (MEMVAULT_AUDIT=off: only to measure what the trail costs)."""
    kind = "" if audit else "-noaudit"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env.update(
        MEMVAULT_VAULT=str(work / f"vault{kind}" / "memory.vault"),
        MEMVAULT_PASSPHRASE=PASSPHRASE,
        XDG_RUNTIME_DIR=str(work / f"run{kind}"),
        XDG_STATE_HOME=str(work / "state"),  # what it saw of its vaults: not the user's
        **({} if audit else {"MEMVAULT_AUDIT": "off"}),
    )
    (work / f"run{kind}").mkdir(mode=0o700)
    mnt = work / f"memvault{kind}-mnt"
    cli = [sys.executable, "-m", "memvault"]
    subprocess.run([*cli, "init"], env=env, check=True, capture_output=True)
    subprocess.run([*cli, "unlock", str(mnt)], env=env, check=True, capture_output=True)
    done = subprocess.run([*cli, "status", "--json"], env=env, check=True, capture_output=True)
    pid = json.loads(done.stdout)["daemon_pid"]

    def pending() -> bool:
        done = subprocess.run([*cli, "status", "--json"], env=env, capture_output=True)
        if done.returncode != 0:
            return False
        state = json.loads(done.stdout).get("daemon") or {}
        busy = state.get("pending_shreds") or state.get("releasing_memory")
        busy = busy or state.get("housekeeping")  # the journal's flush, a compaction
        return state.get("search_index") != "ready" or bool(busy)

    try:
        yield Target("memvault" if audit else "memvault, audit off", mnt, pid, pending)
    finally:
        subprocess.run([*cli, "lock", str(mnt)], env=env, capture_output=True)


@contextmanager
def gocryptfs_mount(work: Path) -> Iterator[Target]:
    cipher, mnt, passfile = work / "gocryptfs-cipher", work / "gocryptfs-mnt", work / "pass"
    cipher.mkdir()
    mnt.mkdir()
    passfile.write_text(PASSPHRASE)
    quiet = {"check": True, "capture_output": True}
    subprocess.run(["gocryptfs", "-init", "-q", "-passfile", str(passfile), str(cipher)], **quiet)
    subprocess.run(["gocryptfs", "-q", "-passfile", str(passfile), str(cipher), str(mnt)], **quiet)
    pid = int(subprocess.run(["pgrep", "-n", "gocryptfs"], **quiet, text=True).stdout.split()[0])
    try:
        yield Target("gocryptfs", mnt, pid)
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True)


@contextmanager
def memfs_mount(
    work: Path, no_flush: bool = False, sealed: bool = False, guarded: bool = False
) -> Iterator[Target]:
    """The memfs floor; ``sealed``: sealing and journaling every write, ``guarded``:
    with memvault's further guarantees too (see memfs.py)."""
    kind = "guarded" if guarded else "sealed" if sealed else "noflush" if no_flush else "plain"
    mnt = work / f"memfs-{kind}-mnt"
    mnt.mkdir()
    script = Path(__file__).resolve().parent / "memfs.py"
    options = ["--no-flush"] * no_flush
    if sealed or guarded:
        options += ["--sealed", str(work / f"memfs-{kind}-journal")] + ["--guarded"] * guarded
    daemon = subprocess.Popen([sys.executable, str(script), str(mnt), *options])
    name = {"guarded": GUARDED_FLOOR, "sealed": SEALED_FLOOR, "noflush": BINDING}
    try:
        wait_mounted(mnt)
        yield Target(name.get(kind, "pyfuse3 memfs"), mnt, daemon.pid)
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True)
        daemon.wait(timeout=30)


def have_gocryptfs() -> bool:
    if shutil.which("gocryptfs"):
        return True
    done = subprocess.run(
        ["apt-get", "install", "-y", "-qq", "gocryptfs"],
        capture_output=True,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )
    return done.returncode == 0 and shutil.which("gocryptfs") is not None


# -- the run ------------------------------------------------------------------------

SETTLE_WINDOW_S = 0.25
SETTLE_MAX_S = 300.0


def settle(targets: list[Target]) -> None:
    """Wait until no daemon is working in the background (memvault's embedding,
    moving its journal into LMDB, compacting after shreds or overwrites), or
    about to, then write every dirty page back: a phase is never timed while
    another target's leftover work takes the cores (that work's CPU time is
    in the round's column). The kernel writes a page back 30 s after it was
    dirtied; without the sync, the 100 MB that one target wrote went to disk
    during whichever target's phase came later.
    """
    deadline = time.monotonic() + SETTLE_MAX_S
    while time.monotonic() < deadline:
        before = [t.cpu() for t in targets]
        time.sleep(SETTLE_WINDOW_S)
        busy = [t.cpu() - b for t, b in zip(targets, before, strict=True)]
        if max(busy) <= 0.02 * SETTLE_WINDOW_S + 1 / TICKS and not any(
            t.pending() for t in targets
        ):
            break
    else:
        print("warning: a daemon was still busy after 300 s; measuring anyway", file=sys.stderr)
    os.sync()


PLACEMENTS = ("free", "same", "split")


def place(targets: list[Target], placement: str) -> None:
    """Pin the daemons (every thread) and this process (with the commands it
    runs) to CPUs: ``same`` all on CPU 0, ``split`` this process on CPU 0 and
    the daemons on CPU 1; ``free`` lets them run on any CPU again."""
    if placement == "split" and (os.cpu_count() or 1) < 2:
        raise SystemExit("--placement split needs two CPUs.")
    every = set(range(os.cpu_count() or 1))
    mine = {"free": every, "same": {0}, "split": {0}}[placement]
    daemons = {"free": every, "same": {0}, "split": {1}}[placement]
    os.sched_setaffinity(0, mine)
    for t in targets:
        if t.pid is None:
            continue
        for tid in os.listdir(f"/proc/{t.pid}/task"):  # threads started later inherit it
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(int(tid), daemons)


ONE_AT_A_TIME = ("create", "append", "atomic save")
THINK_S = 0.002
"""The pause before each change one at a time: a caller that works between changes."""


def one_at_a_time(targets: list[Target], n: int = 300) -> dict[str, dict[str, float]]:
    """The median µs of each change made alone, THINK_S after the last (what an
    agent writing a memory now and then sees), the targets taking turns:
    a new small file written, a line appended, a file saved atomically."""
    samples: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    body = b"# a memory\n" + b"a line of what was learned\n" * 60
    for t in targets:
        (t.root / "alone").mkdir()
    settle(targets)
    for i in range(n):
        for t in targets if i % 2 else targets[::-1]:
            path, tmp = t.root / "alone" / f"m{i}.md", t.root / "alone" / f".m{i}.md.tmp"

            def create(path=path) -> None:
                with open(path, "wb") as f:
                    f.write(body)

            def append(path=path) -> None:
                with open(path, "ab") as f:
                    f.write(b"- one more line\n")

            def save(path=path, tmp=tmp) -> None:
                with open(tmp, "wb") as f:
                    f.write(body)
                    f.flush()
                    os.fsync(f.fileno())
                os.rename(tmp, path)

            for name, change in zip(ONE_AT_A_TIME, (create, append, save), strict=True):
                time.sleep(THINK_S)
                start = time.perf_counter()
                change()
                samples[t.name][name].append(time.perf_counter() - start)
    return {t: {c: statistics.median(v) * 1e6 for c, v in by.items()} for t, by in samples.items()}


def report_one_at_a_time(targets: list[Target], alone: dict[str, dict[str, float]]) -> None:
    names = [t.name for t in targets]
    peer = peer_of(names)
    print(
        f"\nOne change at a time, {THINK_S * 1e3:.0f} ms after the last (median µs): "
        "a new file written, a line appended, a file saved atomically (fsync, rename):\n"
    )
    print("| change | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for change in ONE_AT_A_TIME:
        cells = [ratio_cell(n, alone[n][change], alone[peer][change], peer) for n in names]
        print(f"| {change} | " + " | ".join(cells) + " |")


def latency_by_placement(targets: list[Target]) -> dict[str, dict[str, float]]:
    """The cached open+read+close of each target with the daemons on this
    process's CPU and on the other one, then free again: how much of a free
    run's figures is where the scheduler happened to put each daemon."""
    found: dict[str, dict[str, float]] = {}
    try:
        for placement in ("same", "split"):
            place(targets, placement)
            found[placement] = {}
            for t in targets:
                settle(targets)  # nobody's background work in the way (see measure)
                found[placement][t.name] = open_read_close(t.root)
    finally:
        place(targets, "free")
    return found


def shared_cpu(before: tuple[int, int], after: tuple[int, int]) -> bool:
    """Whether a Python daemon served a phase on its caller's CPU: its reader, watching
    the device for the next request, yielded the CPU to the caller (involuntary
    switches) rather than sleeping or running alone on the other CPU."""
    voluntary, involuntary = (a - b for a, b in zip(after, before, strict=True))
    return involuntary > max(voluntary, 10)


def measure(targets: list[Target], workload: Workload, rounds: int):
    times: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    cpu: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    shared: dict[str, dict[str, list[bool]]] = defaultdict(lambda: defaultdict(list))
    phases = SMALL_PHASES + [p.format(mb=workload.megabytes) for p in BIG_PHASES]
    for r in range(rounds):
        order = targets[r % len(targets) :] + targets[: r % len(targets)]
        print(f"round {r + 1}/{rounds}: " + ", ".join(t.name for t in order), file=sys.stderr)
        start_cpu = {t.name: t.cpu() for t in order}
        for phase in phases:
            for t in order:
                base = t.root / f"round-{r}"
                base.mkdir(exist_ok=True)
                fn = workload.phase(phase, base)
                settle(targets)
                if phase.startswith("read ") and phase.endswith(" MB"):
                    # After settle: what its `memvault status` reads of the vault file
                    # (all of it before 3d4b4f8) must not be cached when the read starts.
                    drop_caches()
                before, switched = t.cpu(), t.switches()
                started = time.perf_counter()
                fn()
                times[t.name][phase].append(time.perf_counter() - started)
                cpu[t.name][phase].append(t.cpu() - before)
                shared[t.name][phase].append(shared_cpu(switched, t.switches()))
        for t in order:
            times[t.name][LATENCY].append(open_read_close(t.root / f"round-{r}"))
            (t.root / f"round-{r}" / "big.bin").unlink()
            (t.root / f"round-{r}").rmdir()
            cpu[t.name]["round"].append(t.cpu() - start_cpu[t.name])
    return phases, times, cpu, shared


def peer_of(names: list[str]) -> str:
    """The target the others are compared with: gocryptfs, or the first one."""
    return "gocryptfs" if "gocryptfs" in names else names[0]


def ratio_cell(name: str, value: float, against: float, peer: str) -> str:
    """A figure, with its ratio to the peer's unless it is the peer's or ext4's."""
    if name in (peer, "ext4"):
        return f"{value:,.0f}"
    return f"{value:,.0f} ({value / against:.2f}x)"


def report(
    targets: list[Target], phases: list[str], times, cpu, rounds: int, files: int, placement: str
) -> None:
    names = [t.name for t in targets]
    med = {n: {p: statistics.median(v) for p, v in times[n].items()} for n in names}
    cmed = {n: {p: statistics.median(v) for p, v in cpu[n].items()} for n in names}
    peer = peer_of(names)
    print(
        f"# memvault filesystem benchmark ({time.strftime('%Y-%m-%d')}, "
        f"{rounds} interleaved rounds, medians, placement {placement})\n"
    )
    print("Times in ms; x = ratio to " + peer + "; CPU = the daemon's CPU seconds in the phase.\n")
    header = ["phase", *names, "memvault CPU s", f"{peer} CPU s"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))

    sums = {n: 0.0 for n in names}
    for phase_key in phases:
        row = [phase_key]
        for n in names:
            value = med[n][phase_key] * 1e3
            sums[n] += value
            row.append(ratio_cell(n, value, med[peer][phase_key] * 1e3, peer))
        row += [f"{cmed['memvault'][phase_key]:.2f}", f"{cmed[peer][phase_key]:.2f}"]
        print("| " + " | ".join(row) + " |")
    row = ["**sum**"] + [ratio_cell(n, sums[n], sums[peer], peer) for n in names]
    row += [f"{cmed['memvault']['round']:.1f} (round)", f"{cmed[peer]['round']:.1f} (round)"]
    print("| " + " | ".join(row) + " |")
    latencies = [ratio_cell(n, med[n][LATENCY], med[peer][LATENCY], peer) for n in names]
    row = [LATENCY, *latencies, "", ""]
    print("| " + " | ".join(row) + " |")
    if "memvault, audit off" in names:
        off = "memvault, audit off"
        ratios = [f"{p} {med['memvault'][p] / med[off][p]:.2f}" for p in phases]
        print(
            f"\nThe audit trail's cost, memvault / memvault with it off: sum "
            f"{sums['memvault'] / sums[off]:.3f}; " + ", ".join(ratios)
        )
    if peer == "gocryptfs" and {BINDING, SEALED_FLOOR, GUARDED_FLOOR} <= set(names):
        budget(med, sums, files)


def report_rounds(phases: list[str], times) -> None:
    """Each round's figure beside the median, for memvault and its peer: on a
    shared machine a median of three moves with the host, and how many rounds
    memvault took no longer than the peer says more than one ratio."""
    peer = peer_of(list(times))
    print(
        f"\nEach round (ms, in the order run) of {peer} and memvault, and in how many "
        f"rounds memvault took at most {peer}'s time:\n"
    )
    print(f"| phase | {peer} | memvault | rounds at or under 1.0x |")
    print("|---|---|---|---|")
    for phase in phases:
        theirs, ours = times[peer][phase], times["memvault"][phase]
        won = sum(o <= t for o, t in zip(ours, theirs, strict=True))
        cells = [", ".join(f"{v * 1e3:,.0f}" for v in vs) for vs in (theirs, ours)]
        print(f"| {phase} | " + " | ".join(cells) + f" | {won}/{len(ours)} |")


def report_shared(targets: list[Target], phases: list[str], shared, rounds: int) -> None:
    """Per phase, in how many rounds each Python daemon ran on its caller's CPU: a
    phase's figure is about twice as long when it ran on the other one (each
    reply then wakes the caller on an idle core), so this says which rounds
    its median came from."""
    names = [t.name for t in targets if "memvault" in t.name or "memfs" in t.name]
    print(
        "\nRounds in which each Python daemon served the phase on its caller's CPU "
        "(the others: on the other CPU, or mostly asleep, as in atomic-save's fsyncs):\n"
    )
    print("| phase | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for phase in phases:
        cells = [f"{sum(shared[n][phase])}/{rounds}" for n in names]
        print(f"| {phase} | " + " | ".join(cells) + " |")


def report_placements(targets: list[Target], pinned: dict[str, dict[str, float]]) -> None:
    names = [t.name for t in targets]
    peer = peer_of(names)
    print(
        "\nThe cached open+read+close (median µs) with every daemon on this process's CPU "
        "(same) and on the other one (split), after the rounds above:\n"
    )
    print("| placement | " + " | ".join(names) + " |")
    print("|---" * (len(names) + 1) + "|")
    for placement, by_name in pinned.items():
        cells = [ratio_cell(n, by_name[n], by_name[peer], peer) for n in names]
        print(f"| {placement} | " + " | ".join(cells) + " |")


def budget(med: dict, sums: dict, files: int) -> None:
    """What the binding leaves: per file, the time gocryptfs takes beyond the bare
    pyfuse3 + trio memfs is all a file system on this stack may spend on its
    own work (sealing, journaling, bookkeeping) to be as fast as gocryptfs;
    beside it, what memvault and the two floors spend."""
    print(
        f"\nPer file, µs: what gocryptfs takes beyond the bare binding ({BINDING}), "
        "i.e. all that sealing, journaling and bookkeeping may cost for 1.0x, "
        "and what memvault and the two floors spend beyond it.\n"
    )
    print("| phase | files | left by the binding | memvault | sealed floor | guarded floor |")
    print("|---|---|---|---|---|---|")
    for phase in SMALL_PHASES:
        touched = {"append to 500": APPENDED, "atomic-save 200": SAVED}.get(phase)
        n = len(range(files)[touched]) if touched else files
        if not n:
            continue
        over = {t: (med[t][phase] - med[BINDING][phase]) * 1e6 / n for t in med}
        cells = [f"{over[t]:,.0f}" for t in ("gocryptfs", "memvault", SEALED_FLOOR, GUARDED_FLOOR)]
        print(f"| {phase} | {n:,} | " + " | ".join(cells) + " |")
    bare = sums[BINDING] / sums["gocryptfs"]
    print(
        f"\nThe bare binding's sum is {bare:.2f}x gocryptfs's: a sum at 0.8x leaves "
        f"{(0.8 - bare) * sums['gocryptfs']:,.0f} ms for all the sealing, journaling and "
        f"bookkeeping of a round; the sealed floor spends "
        f"{sums[SEALED_FLOOR] - sums[BINDING]:,.0f} ms on it, the guarded floor "
        f"{sums[GUARDED_FLOOR] - sums[BINDING]:,.0f} ms, memvault "
        f"{sums['memvault'] - sums[BINDING]:,.0f} ms."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--big-mb", type=int, default=100)
    parser.add_argument("--dir", help="where to work (default: a temp dir on the disk of /var/tmp)")
    parser.add_argument(
        "--placement",
        choices=PLACEMENTS,
        default="free",
        help="the daemons' CPUs: on this process's (same), on another (split), "
        "or the scheduler's choice (free, the default); see the module's docstring",
    )
    args = parser.parse_args()
    workload = Workload(args.files, args.big_mb)
    with tempfile.TemporaryDirectory(dir=args.dir or "/var/tmp") as tmp:
        work = Path(tmp)
        plain = work / "ext4"
        plain.mkdir()
        with contextlib.ExitStack() as stack:
            targets = [Target("ext4", plain, None)]
            if have_gocryptfs():
                targets.append(stack.enter_context(gocryptfs_mount(work)))
            targets.append(stack.enter_context(memvault_mount(work)))
            targets.append(stack.enter_context(memvault_mount(work, audit=False)))
            targets.append(stack.enter_context(memfs_mount(work)))
            targets.append(stack.enter_context(memfs_mount(work, no_flush=True)))
            targets.append(stack.enter_context(memfs_mount(work, no_flush=True, sealed=True)))
            targets.append(stack.enter_context(memfs_mount(work, no_flush=True, guarded=True)))
            pinned = {}
            if args.placement != "free":
                place(targets, args.placement)
            phases, times, cpu, shared = measure(targets, workload, args.rounds)
            alone = one_at_a_time(targets)
            if args.placement == "free" and (os.cpu_count() or 1) >= 2:
                pinned = latency_by_placement(targets)
    report(targets, phases, times, cpu, args.rounds, args.files, args.placement)
    report_rounds(phases, times)
    report_shared(targets, phases, shared, args.rounds)
    report_one_at_a_time(targets, alone)
    if pinned:
        report_placements(targets, pinned)


if __name__ == "__main__":
    main()
