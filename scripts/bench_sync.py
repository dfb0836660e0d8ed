"""Sync benchmark (issue 16): a vault of N memories synced for the first time to an
SFTP remote (OpenSSH's sshd on 127.0.0.1, started here), then joined by a
second device; and the time a change takes from one device to the other
through one `sync` on each (the --watch mode is not built yet).

Usage: scripts/bench sync [--memories 20000] [--rounds 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.sync.devices import Device  # noqa: E402
from tests.sync.servers import sftp  # noqa: E402


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
    print(f"# memvault sync benchmark ({time.strftime('%Y-%m-%d %H:%M')}, SFTP on 127.0.0.1)\n")
    print(f"| {args.memories:,} memories | seconds |\n|---|---|")
    print(f"| first sync (init, upload everything) | {first:.1f} |")
    print(f"| join on a second device (download, build its vault) | {join:.1f} |")
    print(f"| remote size | {remote_bytes / 1e6:.1f} MB |")
    print(
        f"| a write on A until B has it (A sync, then B sync), median of {args.rounds} | "
        f"{statistics.median(times):.2f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
