"""Issue 9: a failed or interrupted `memvault put` through the mount must
leave the memory it was replacing intact (it left 256 MiB of zeros)."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time

from memvault.vault import MAX_MEMORY_SIZE

from ..conftest import assert_one_line_error
from ..fsutil import mounted

KEEP = b"# Keep\n" + secrets.token_hex(32).encode() + b"\nthis memory must survive\n"


def _leftovers(directory) -> list[str]:
    return [n for n in os.listdir(directory) if n != "keep.md"]


def test_too_large_put_while_mounted_keeps_the_old_memory(tmp_path):
    with mounted(tmp_path) as m:
        (m.root / "notes").mkdir()
        (m.root / "notes" / "keep.md").write_bytes(KEEP)
        too_large = MAX_MEMORY_SIZE + 4096
        big = subprocess.run(
            f"head -c {too_large} /dev/zero | {sys.executable} -m memvault put notes/keep.md",
            shell=True,
            env=m.env,
            capture_output=True,
            timeout=300,
            start_new_session=True,
        )
        line = assert_one_line_error(big)
        assert "at most" in line and "notes/keep.md" in line, line
        assert (m.root / "notes" / "keep.md").read_bytes() == KEEP
        assert _leftovers(m.root / "notes") == []


def test_put_interrupted_while_writing_through_the_mount_keeps_the_old_memory(tmp_path):
    with mounted(tmp_path) as m:
        notes = m.root / "notes"
        notes.mkdir()
        (notes / "keep.md").write_bytes(KEEP)
        put = subprocess.Popen(
            [sys.executable, "-m", "memvault", "put", "notes/keep.md"],
            env=m.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )

        def feed() -> None:
            chunk = b"new content line\n" * 4096
            try:
                for _ in range((128 << 20) // len(chunk)):
                    put.stdin.write(chunk)
                put.stdin.close()
            except BrokenPipeError:
                pass

        feeder = threading.Thread(target=feed, daemon=True)
        feeder.start()
        # Interrupt as soon as the put has started writing into the vault.
        deadline = time.monotonic() + 120
        while (notes / "keep.md").stat().st_size == len(KEEP) and not _leftovers(notes):
            assert put.poll() is None, put.stderr.read()
            assert time.monotonic() < deadline, "the put never started writing"
            time.sleep(0.005)
        put.send_signal(signal.SIGINT)
        put.wait(timeout=120)
        err = put.stderr.read()
        feeder.join(timeout=30)
        assert put.returncode == 130, err
        assert err.decode().strip() == "memvault: interrupted.", err
        assert (notes / "keep.md").read_bytes() == KEEP
        assert _leftovers(notes) == []


def test_put_on_a_full_disk_while_mounted_keeps_the_old_memory(tmp_path):
    vault_dir = tmp_path / "vault"  # where fsutil.mounted() puts the vault: a 3 MiB tmpfs
    vault_dir.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(vault_dir)], check=True)
    try:
        with mounted(tmp_path) as m:
            (m.root / "notes").mkdir()
            (m.root / "notes" / "keep.md").write_bytes(KEEP)
            full = m.cli("put", "notes/keep.md", input=os.urandom(8 << 20))
            assert "disk holding" in assert_one_line_error(full)
            assert (m.root / "notes" / "keep.md").read_bytes() == KEEP
            assert _leftovers(m.root / "notes") == []
    finally:
        subprocess.run(["umount", "-l", str(vault_dir)], check=False)
