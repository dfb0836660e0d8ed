"""Filesystem figures for BENCHMARKS.md: small-file phases, 100 MB sequential
I/O and cached open+read+close latency, on a memvault mount, a plain
directory and (when apt can install it) gocryptfs, in the same run.

Usage: scripts/bench fs [--files 2000] [--big-mb 100]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic import note  # noqa: E402

PASSPHRASE = "benchmark passphrase"


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def drop_caches() -> None:
    os.sync()
    with contextlib.suppress(OSError):  # not root: reads may come from the page cache
        Path("/proc/sys/vm/drop_caches").write_text("3\n")


def small_file_phases(root: Path, count: int) -> dict[str, float]:
    rng = random.Random(5)
    files = [root / f"d{i % 20:02d}" / f"note-{i:05d}.md" for i in range(count)]
    contents = [note(rng, rng.randint(500, 3000)) for _ in files]
    results: dict[str, float] = {}

    def create() -> None:
        for d in {f.parent for f in files}:
            d.mkdir()
        for path, data in zip(files, contents, strict=True):
            with open(path, "wb") as f:
                f.write(data)

    def read_all() -> None:
        for path in files:
            with open(path, "rb") as f:
                f.read()

    def append() -> None:
        for path in files[:500]:
            with open(path, "ab") as f:
                f.write(b"\n- appended line\n")

    def atomic_save() -> None:
        for path in files[500:700]:
            tmp = path.with_name(f".{path.name}.tmp")
            with open(tmp, "wb") as f:
                f.write(b"# rewritten\n" + os.urandom(8).hex().encode() * 60)
                f.flush()
                os.fsync(f.fileno())
            os.rename(tmp, path)

    def remove_all() -> None:
        for path in files:
            path.unlink()
        for d in {f.parent for f in files}:
            d.rmdir()

    results[f"create {count} files in 20 dirs"] = timed(create)
    results["ls -lR"] = timed(
        lambda: subprocess.run(["ls", "-lR", str(root)], stdout=subprocess.DEVNULL, check=True)
    )
    results["read all"] = timed(read_all)
    results["grep -rl"] = timed(
        lambda: subprocess.run(["grep", "-rl", "ticket 4242", str(root)], stdout=subprocess.DEVNULL)
    )
    results["append to 500"] = timed(append)
    results["atomic-save 200"] = timed(atomic_save)
    results["rm all"] = timed(remove_all)
    return results


def big_file(root: Path, megabytes: int) -> dict[str, float]:
    chunk = os.urandom(1 << 20)
    path = root / "big.bin"

    def write() -> None:
        with open(path, "wb") as f:
            for _ in range(megabytes):
                f.write(chunk)

    def read() -> None:
        with open(path, "rb") as f:
            while f.read(1 << 20):
                pass

    results = {f"write {megabytes} MB": timed(write)}
    drop_caches()
    results[f"read {megabytes} MB"] = timed(read)
    path.unlink()
    return results


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
    return statistics.median(samples)


def run_all(root: Path, count: int, megabytes: int) -> dict[str, float]:
    results = small_file_phases(root, count)
    results.update(big_file(root, megabytes))
    results["open+read+close (median of 1000, µs)"] = open_read_close(root) * 1e6
    return results


@contextmanager
def memvault_mount(work: Path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env.update(
        MEMVAULT_VAULT=str(work / "vault" / "memory.vault"),
        MEMVAULT_PASSPHRASE=PASSPHRASE,
        XDG_RUNTIME_DIR=str(work / "run"),
    )
    (work / "run").mkdir()
    mnt = work / "memvault-mnt"
    cli = [sys.executable, "-m", "memvault"]
    subprocess.run([*cli, "init"], env=env, check=True, capture_output=True)
    subprocess.run([*cli, "unlock", str(mnt)], env=env, check=True, capture_output=True)
    try:
        yield mnt
    finally:
        subprocess.run([*cli, "lock", str(mnt)], env=env, capture_output=True)


@contextmanager
def gocryptfs_mount(work: Path):
    cipher, mnt, passfile = work / "gocryptfs-cipher", work / "gocryptfs-mnt", work / "pass"
    cipher.mkdir()
    mnt.mkdir()
    passfile.write_text(PASSPHRASE)
    subprocess.run(
        ["gocryptfs", "-init", "-q", "-passfile", str(passfile), str(cipher)],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        ["gocryptfs", "-q", "-passfile", str(passfile), str(cipher), str(mnt)],
        check=True,
        capture_output=True,
    )
    try:
        yield mnt
    finally:
        subprocess.run(["fusermount3", "-u", str(mnt)], capture_output=True)


def have_gocryptfs() -> bool:
    if shutil.which("gocryptfs"):
        return True
    done = subprocess.run(
        ["apt-get", "install", "-y", "-qq", "gocryptfs"],
        capture_output=True,
        env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
    )
    return done.returncode == 0 and shutil.which("gocryptfs") is not None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--big-mb", type=int, default=100)
    parser.add_argument("--dir", help="where to work (default: a temp dir on the disk of /var/tmp)")
    args = parser.parse_args()
    columns: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(dir=args.dir or "/var/tmp") as tmp:
        work = Path(tmp)
        plain = work / "plain"
        plain.mkdir()
        columns["plain dir"] = run_all(plain, args.files, args.big_mb)
        with memvault_mount(work) as mnt:
            columns["memvault"] = run_all(mnt, args.files, args.big_mb)
        if have_gocryptfs():
            with gocryptfs_mount(work) as mnt:
                columns["gocryptfs"] = run_all(mnt, args.files, args.big_mb)
    print(f"# memvault filesystem benchmark ({time.strftime('%Y-%m-%d')})\n")
    names = list(columns)
    header = ["phase", *[f"{n} (s)" for n in names], "memvault / plain"]
    if "gocryptfs" in columns:
        header.append("memvault / gocryptfs")
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for phase in columns["plain dir"]:
        row = [phase] + [f"{columns[n][phase]:.3f}" for n in names]
        row.append(f"{columns['memvault'][phase] / columns['plain dir'][phase]:.1f}x")
        if "gocryptfs" in columns:
            row.append(f"{columns['memvault'][phase] / columns['gocryptfs'][phase]:.2f}x")
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
