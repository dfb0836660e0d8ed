"""The daemon's control channel on real mounts: `compact`, `status` and `lock`
ask the daemon and get its answer (results, or its error as one sentence);
nobody but the owner gets an answer."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memvault.vault.store import compaction_owed

from ..conftest import assert_one_line_error, small_disk
from ..fsutil import make_env, mounted

NOBODY = 65534


def _sizes(line: str) -> tuple[float, float]:
    """The sizes of "Compacted PATH: 828.0 KiB -> 652.0 KiB." in KiB."""
    found = re.search(r": ([\d.]+) (bytes|KiB|MiB) -> ([\d.]+) (bytes|KiB|MiB)\.$", line)
    assert found, line
    scale = {"bytes": 1 / 1024, "KiB": 1, "MiB": 1024}
    return float(found[1]) * scale[found[2]], float(found[3]) * scale[found[4]]


def test_compact_returns_when_done_with_the_sizes_it_produced(tmp_path):
    with mounted(tmp_path) as m:
        for i in range(120):
            (m.root / f"n{i}.md").write_bytes(os.urandom(3000).hex().encode())
        for i in range(100):
            os.unlink(m.root / f"n{i}.md")
        status = m.cli("status").stdout.decode()
        assert "memories:  20" in status, status  # asked of the daemon: no stale counter
        done = m.cli("compact")
        assert done.returncode == 0, done.stderr
        before, after = _sizes(done.stderr.decode().strip())
        assert after < before * 0.6, (before, after)  # 100 of 120 memories were shredded
        assert abs(os.stat(m.vault).st_size / 1024 - after) < 0.1, "the size is the file's"
        assert not m.vault.with_name(m.vault.name + ".compacting").exists()
        assert not compaction_owed(m.vault), "returned before the compaction was done"
        assert done.stdout == b"", "messages go to stderr"


def test_an_error_inside_the_daemon_reaches_the_cli_as_its_sentence(tmp_path):
    env = make_env(tmp_path)
    vault_dir = Path(env["MEMVAULT_VAULT"]).parent
    with small_disk(vault_dir, "3m"), mounted(tmp_path) as m:
        for i in range(60):
            (m.root / f"f{i}.md").write_bytes(os.urandom(4000).hex().encode())
        for i in range(20):
            os.unlink(m.root / f"f{i}.md")
        filler = vault_dir / "filler"
        with open(filler, "wb") as f:  # the disk, full: the compacted copy cannot be written
            try:
                while True:
                    f.write(b"\0" * 65536)
            except OSError:
                pass
        failed = m.cli("compact")
        line = assert_one_line_error(failed)
        assert failed.returncode == 1 and "is full" in line, line
        assert (m.root / "f30.md").exists(), "the mount goes on serving"
        filler.unlink()
        assert m.cli("compact").returncode == 0
        locked = m.lock()
        assert locked.returncode == 0, locked.stderr
        assert "Locked" in locked.stderr.decode()


def test_a_daemon_that_does_not_answer_is_reported_and_still_locks(tmp_path):
    with mounted(tmp_path) as m:
        sock = next((tmp_path / "run" / "memvault").glob("*.sock"))
        os.rename(sock, sock.with_suffix(".moved"))
        status = m.cli("status")
        assert status.returncode == 0, status.stderr
        assert "does not answer" in status.stdout.decode()
        locked = m.lock()  # by SIGTERM when the socket does not answer
        assert locked.returncode == 0, locked.stderr
        assert not m.is_mounted()


PROBE = """
import os, socket, sys
os.setgid({uid}); os.setuid({uid})
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print("refused", exc.errno); sys.exit(0)
try:  # the daemon may answer a stranger and close before the request is sent
    s.sendall(b'{{"v": 1, "op": "status"}}\\n'); s.shutdown(socket.SHUT_WR)
except (BrokenPipeError, ConnectionResetError):
    pass
print(s.recv(65536).decode())
"""


def _probe_as_nobody(sock: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(uid=NOBODY), str(sock)],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


def test_the_control_socket_answers_only_its_owner(tmp_path):
    with mounted(tmp_path):
        sock = next((tmp_path / "run" / "memvault").glob("*.sock"))
        assert (os.stat(sock).st_mode & 0o777) == 0o600
        assert _probe_as_nobody(sock).startswith("refused"), "the directory and socket modes"
        # Even reached through an open directory with the socket's mode opened
        # up (a hard link to the same socket), the daemon checks the peer's uid.
        opened = Path(tempfile.mkdtemp(prefix="memvault-probe-"))
        try:
            os.chmod(opened, 0o755)
            os.link(sock, opened / "ctl.sock")
            os.chmod(sock, 0o666)
            answer = _probe_as_nobody(opened / "ctl.sock")
            assert "answers only its own user" in answer and "memories" not in answer, answer
        finally:
            shutil.rmtree(opened)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as mine:  # the owner is answered
            mine.connect(str(sock))
            mine.sendall(b'{"v": 1, "op": "status"}\n')
            mine.shutdown(socket.SHUT_WR)
            assert b'"memories":0' in mine.recv(65536)


def test_status_says_what_work_the_last_changes_left_in_the_background(tmp_path):
    """What `scripts/bench fs` waits for between phases: the journal moved into
    LMDB and the debounced compaction after shreds, reported until they are done."""
    with mounted(tmp_path) as m:
        for i in range(30):
            (m.root / f"n{i}.md").write_text(f"note {i}\n")
        for i in range(10):
            os.unlink(m.root / f"n{i}.md")
        daemon = json.loads(m.cli("status", "--json").stdout)["daemon"]
        assert "compaction" in daemon["housekeeping"], daemon  # debounced: seconds away
        assert "background work: " in m.cli("status").stdout.decode()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            daemon = json.loads(m.cli("status", "--json").stdout)["daemon"]
            if not daemon["housekeeping"]:
                break
            time.sleep(0.2)
        assert daemon["housekeeping"] == [] and daemon["journaled_changes"] == 0, daemon
        assert daemon["pending_shreds"] == 0 and not compaction_owed(m.vault), daemon
        assert "background work: none" in m.cli("status").stdout.decode()
