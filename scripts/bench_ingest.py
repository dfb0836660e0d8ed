"""Ingest figures for BENCHMARKS.md: throughput and peak memory of `memvault ingest`
on a generated Claude Code history (fixed seed), in two shapes of the same size:
one 50 MB session file (the worst case for memory) and 100 sessions of 0.5 MB.

Each import runs the real command line in a child process against a fresh
vault (a light KDF, so Argon2id is not what is measured); peak memory is the
child's maximum RSS.

Usage: scripts/bench ingest [--mb 50]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from synthetic import note  # noqa: E402

PASSPHRASE = "benchmark passphrase"
FAST_KDF = ["--kdf-time", "1", "--kdf-memory", "8", "--kdf-parallelism", "1"]


def session_lines(rng: random.Random, session_id: str, target: int):
    """Claude Code records (prompts, answers, tool calls and results) up to ``target`` bytes."""
    base = {
        "sessionId": session_id,
        "cwd": "/home/dev/projects/api",
        "gitBranch": "main",
        "version": "2.1.39",
        "userType": "external",
        "isSidechain": False,
    }
    size, turn, parent = 0, 0, None
    while size < target:
        turn += 1
        stamp = f"2026-02-{1 + turn % 28:02d}T10:{turn % 60:02d}:00.000Z"

        def record(kind: str, stamp: str = stamp, **fields) -> str:
            nonlocal parent
            uid = str(uuid.UUID(int=rng.getrandbits(128)))
            line = json.dumps(
                base
                | {"type": kind, "uuid": uid, "parentUuid": parent, "timestamp": stamp}
                | fields
            )
            parent = uid
            return line + "\n"

        prompt = note(rng, rng.randint(80, 400)).decode()
        out = [record("user", message={"role": "user", "content": prompt})]
        message_id = f"msg_{turn:06d}"
        answer = note(rng, rng.randint(200, 1200)).decode()
        out.append(
            record(
                "assistant",
                message={
                    "id": message_id,
                    "role": "assistant",
                    "content": [{"type": "text", "text": answer}],
                },
            )
        )
        for call in range(rng.randint(1, 4)):
            tool_id = f"toolu_{turn:06d}_{call}"
            if rng.random() < 0.5:
                tool = {"name": "Bash", "input": {"command": f"pytest -k case_{turn}_{call}"}}
            else:
                tool = {
                    "name": "Edit",
                    "input": {
                        "file_path": f"/home/dev/projects/api/m{call}.py",
                        "old_string": "a",
                        "new_string": "b",
                    },
                }
            out.append(
                record(
                    "assistant",
                    message={
                        "id": message_id,
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": tool_id, **tool}],
                    },
                )
            )
            output = note(rng, rng.randint(500, 12000)).decode()
            out.append(
                record(
                    "user",
                    message={
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": tool_id, "content": output}
                        ],
                    },
                )
            )
            out.append(record("progress", data={"type": "bash_progress", "output": output[:300]}))
        for line in out:
            size += len(line)
            yield line


def write_history(root: Path, total_mb: float, sessions: int, seed: int = 11) -> tuple[int, int]:
    """Write ``sessions`` files totalling ``total_mb``; return (bytes, records)."""
    rng = random.Random(seed)
    project = root / "projects" / "-home-dev-projects-api"
    project.mkdir(parents=True)
    size = records = 0
    for _ in range(sessions):
        session_id = str(uuid.UUID(int=rng.getrandbits(128)))
        with open(project / f"{session_id}.jsonl", "w") as f:
            for line in session_lines(rng, session_id, int(total_mb * 1e6 / sessions)):
                f.write(line)
                size += len(line)
                records += 1
    return size, records


def run_ingest(history: Path, work: Path) -> tuple[float, float, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env.update(MEMVAULT_VAULT=str(work / "vault" / "memory.vault"), MEMVAULT_PASSPHRASE=PASSPHRASE)
    cli = [sys.executable, "-m", "memvault"]
    subprocess.run([*cli, "init", *FAST_KDF], env=env, check=True, capture_output=True)
    # A wrapper with this one child: its RUSAGE_CHILDREN peak is the ingest's own.
    wrapper = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True); "
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)"
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", wrapper, *cli, "ingest", "claude", "--source", str(history)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    took = time.perf_counter() - started
    peak = int(done.stderr.strip().splitlines()[-1])
    out = done.stdout
    return took, peak / 1024, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=50)
    args = parser.parse_args()
    print(f"# memvault ingest benchmark ({time.strftime('%Y-%m-%d')})")
    for sessions in (1, 100):
        with tempfile.TemporaryDirectory(dir="/var/tmp") as tmp:
            work = Path(tmp)
            size, records = write_history(work / "claude", args.mb, sessions)
            took, peak_mb, out = run_ingest(work / "claude", work)
            messages = int(out.splitlines()[1].split()[0])
            print(
                f"\n## {size / 1e6:.1f} MB Claude Code history in {sessions} session file(s) "
                f"({records:,} records)"
            )
            print(
                f"- ingest: {took:.2f} s = {size / 1e6 / took:.1f} MB/s, "
                f"{messages / took:,.0f} messages/s ({messages:,} messages)"
            )
            print(f"- peak RSS of the ingest process: {peak_mb:.0f} MB")
            print("- " + out.splitlines()[0])


if __name__ == "__main__":
    main()
