"""Sync benchmark (issue 16): a vault of N memories synced for the first time to an
SFTP remote (OpenSSH's sshd on 127.0.0.1, started here), then joined by a
second device; then both vaults are mounted (`memvault unlock`) with
`memvault sync --watch`, and a file written through A's mount is waited for
in B's mount: the propagation time, median over the rounds. (Also, in
process, the time through one explicit `sync` on each device.)

Usage: scripts/bench sync [--memories 20000] [--rounds 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import PASSPHRASE  # noqa: E402
from tests.sync.devices import Device  # noqa: E402
from tests.sync.servers import sftp  # noqa: E402


@contextmanager
def watching_mount(device: Device):
    """The device's vault unlocked at ``home/mnt`` with `sync --watch`; locked on exit."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env.update(
        MEMVAULT_VAULT=str(device.path),
        MEMVAULT_PASSPHRASE=PASSPHRASE.decode(),
        XDG_RUNTIME_DIR=str(device.home / "run"),
    )
    (device.home / "run").mkdir(mode=0o700, exist_ok=True)
    mnt = device.home / "mnt"
    cli = [sys.executable, "-m", "memvault"]
    subprocess.run([*cli, "unlock", str(mnt)], env=env, check=True, capture_output=True)
    try:
        done = subprocess.run([*cli, "sync", "--watch"], env=env, capture_output=True)
        if done.returncode:
            raise RuntimeError(done.stderr.decode())
        yield mnt
    finally:
        subprocess.run([*cli, "lock"], env=env, capture_output=True)


def wait_for(path: Path, timeout: float = 120.0) -> float:
    start = time.perf_counter()
    while not path.exists():
        if time.perf_counter() - start > timeout:
            raise RuntimeError(f"{path.name} never arrived")
        time.sleep(0.02)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    words = ["memory", "vault", "agent", "sync", "remote", "device", "note", "decision"]
    with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp, sftp(Path(tmp)) as server:
        a, b = Device(Path(tmp), "laptop", server), Device(Path(tmp), "desk", server)
        items = []
        for i in range(args.memories):
            body = " ".join(words[(i * 7 + k) % len(words)] for k in range(40 + i % 300))
            items.append((f"d{i % 100}/note-{i}.md", f"# note {i}\n{body}\n".encode()))
        for start in range(0, len(items), 1000):
            a.vault.put_many(items[start : start + 1000])
        t = time.perf_counter()
        a.start_group()
        first = time.perf_counter() - t
        t = time.perf_counter()
        b.join()
        join = time.perf_counter() - t
        assert len(b.tree()) == len(a.tree())
        remote_bytes = sum(p.stat().st_size for p in server.root.rglob("*") if p.is_file())
        times = []
        for r in range(args.rounds):
            t = time.perf_counter()
            a.vault.put(f"round-{r}.md", f"round {r}\n".encode())
            a.sync()
            b.sync()
            assert b.vault.exists(f"round-{r}.md")
            times.append(time.perf_counter() - t)
        a.close()
        b.close()
        watched = []
        with ExitStack() as stack:
            mnt_a = stack.enter_context(watching_mount(a))
            mnt_b = stack.enter_context(watching_mount(b))
            time.sleep(3)
            for r in range(args.rounds):
                name = f"watched-{r}.md"
                t = time.perf_counter()
                (mnt_a / name).write_bytes(f"watched round {r}\n".encode())
                wait_for(mnt_b / name)
                watched.append(time.perf_counter() - t)
                time.sleep(0.5)
    print(f"# memvault sync benchmark ({time.strftime('%Y-%m-%d %H:%M')}, SFTP on 127.0.0.1)\n")
    print(f"| {args.memories:,} memories | seconds |\n|---|---|")
    print(f"| first sync (init, upload everything) | {first:.1f} |")
    print(f"| join on a second device (download, build its vault) | {join:.1f} |")
    print(f"| remote size | {remote_bytes / 1e6:.1f} MB |")
    print(
        f"| a write on A until B has it (A sync, then B sync), median of {args.rounds} | "
        f"{statistics.median(times):.2f} |"
    )
    print(
        f"| a write in A's mount until B's mount shows it (both `sync --watch`), median of "
        f"{args.rounds} (min {min(watched):.2f}, max {max(watched):.2f}) | "
        f"{statistics.median(watched):.2f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
