"""Mount lifecycle on real FUSE mounts: remount, stale mounts, killed daemons,
refusals, status, and the errno of what is not supported."""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from memvault.vault import MAX_MEMORY_SIZE

from ..conftest import assert_one_line_error
from ..fsutil import mounted


def test_remount_keeps_files_directories_modes_and_times(tmp_path):
    t1, t2 = 1_500_000_000_123_456_789, 1_600_000_000_000_000_000
    with mounted(tmp_path, unlock_args=("--xattrs",)) as m:
        root = m.root
        (root / "proj" / "deep" / "er").mkdir(parents=True)
        (root / "proj" / "deep" / "er" / "note.md").write_text("deep note\n")
        (root / "script.sh").write_text("#!/bin/sh\necho hi\n")
        os.chmod(root / "script.sh", 0o750)
        os.chmod(root / "proj" / "deep", 0o711)
        os.utime(root / "script.sh", ns=(t1, t1))
        os.utime(root / "proj" / "deep", ns=(t2, t2))
        (root / "empty").mkdir()
        os.symlink("proj/deep/er/note.md", root / "link.md")
        os.setxattr(root / "script.sh", "user.origin", b"unit test")
        assert m.lock().returncode == 0
        assert not m.is_mounted() and os.listdir(root) == []
        assert m.unlock("--xattrs").returncode == 0
        assert (root / "proj" / "deep" / "er" / "note.md").read_text() == "deep note\n"
        st = os.stat(root / "script.sh")
        assert (st.st_mode & 0o777, st.st_mtime_ns) == (0o750, t1)
        st = os.stat(root / "proj" / "deep")
        assert (st.st_mode & 0o777, st.st_mtime_ns) == (0o711, t2)
        assert (root / "empty").is_dir() and os.listdir(root / "empty") == []
        assert os.readlink(root / "link.md") == "proj/deep/er/note.md"
        assert (root / "link.md").read_text() == "deep note\n"
        assert os.getxattr(root / "script.sh", "user.origin") == b"unit test"
        assert sorted(os.listdir(root)) == ["empty", "link.md", "proj", "script.sh"]


def test_second_unlock_is_refused_and_status_reports_the_mount(tmp_path):
    with mounted(tmp_path) as m:
        (m.root / "a.md").write_text("x")
        again = m.cli("unlock", str(tmp_path / "elsewhere"))
        assert "already unlocked" in assert_one_line_error(again)
        deadline = time.monotonic() + 120  # the daemon publishes its counters every 2 s
        while "search index: ready" not in (status := m.cli("status").stdout.decode()):
            assert time.monotonic() < deadline, status
            time.sleep(0.5)
        assert f"mounted at {m.root}" in status and "memories:  1" in status
        # The scripting CLI works through the mount while it is unlocked.
        assert m.cli("put", "b.md", input=b"via cli").returncode == 0
        assert (m.root / "b.md").read_bytes() == b"via cli"
        assert m.cli("get", "a.md").stdout == b"x"
        assert m.cli("ls").stdout == b"a.md\nb.md\n"
        assert m.cli("mv", "b.md", "c.md").returncode == 0
        assert m.cli("rm", "c.md").returncode == 0
        assert sorted(os.listdir(m.root)) == ["a.md"]
    done = m.cli("lock")
    assert done.returncode == 0 and "not unlocked" in done.stderr.decode()


def test_unlock_refuses_a_non_empty_directory_and_a_wrong_passphrase(tmp_path):
    target = tmp_path / "busy"
    target.mkdir()
    (target / "file").write_text("x")
    with mounted(tmp_path) as m:
        m.lock()
        line = assert_one_line_error(m.cli("unlock", str(target)))
        assert "not empty" in line
        env = dict(m.env, MEMVAULT_PASSPHRASE="wrong")
        wrong = subprocess.run(
            [sys.executable, "-m", "memvault", "unlock", str(m.root)],
            env=env,
            capture_output=True,
            timeout=60,
        )
        assert "Wrong passphrase" in assert_one_line_error(wrong)
        assert not m.is_mounted()


WRITER = textwrap.dedent(
    """
    import os, sys
    root = sys.argv[1]
    i = 0
    while True:
        path = os.path.join(root, f"storm/{i % 7}/f{i}.md")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(f"content of file {i}\\n" * (1 + i % 50))
        print(path, flush=True)  # printed only once close() has returned
        i += 1
    """
)


def test_sigkill_during_a_write_storm_loses_nothing_closed(tmp_path):
    with mounted(tmp_path) as m:
        writer = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(m.root)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        closed = []
        try:
            while len(closed) < 150:
                line = writer.stdout.readline().decode().strip()
                assert line, "the writer stopped early"
                closed.append(line)
            os.kill(m.daemon_pid(), signal.SIGKILL)
            for line in writer.stdout:
                closed.append(line.decode().strip())
        finally:
            writer.kill()
            writer.wait()
        assert m.is_mounted()  # a stale mount: the daemon is gone
        with pytest.raises(OSError) as stale:
            os.listdir(m.root)
        assert stale.value.errno == errno.ENOTCONN
        done = m.unlock()
        assert done.returncode == 0, done.stderr
        assert "cleaned a stale mount" in done.stderr.decode()
        for path in closed:
            i = int(path.rsplit("/f", 1)[1][:-3])
            with open(path) as f:
                assert f.read() == f"content of file {i}\n" * (1 + i % 50), path


def test_lock_cleans_a_stale_mount(tmp_path):
    with mounted(tmp_path) as m:
        os.kill(m.daemon_pid(), signal.SIGKILL)
        time.sleep(0.2)
        done = m.lock()
        assert done.returncode == 0 and "stale mount" in done.stderr.decode()
        assert not m.is_mounted()
        assert m.unlock().returncode == 0


def test_sigterm_to_the_daemon_is_a_clean_lock(tmp_path):
    with mounted(tmp_path) as m:
        (m.root / "keep.md").write_text("kept")
        pid = m.daemon_pid()
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while (m.is_mounted() or m.record() is not None) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not m.is_mounted()
        assert m.record() is None
        assert m.cli("get", "keep.md").stdout == b"kept"


def _renameat2(old, new, flags):
    libc = ctypes.CDLL(None, use_errno=True)
    AT_FDCWD = -100
    if libc.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def test_rename_flags_and_unsupported_operations(tmp_path):
    with mounted(tmp_path, unlock_args=("--xattrs",)) as m:
        a, b = m.root / "a.md", m.root / "b.md"
        a.write_text("A")
        b.write_text("B")
        with pytest.raises(OSError) as noreplace:
            _renameat2(a, b, 1)  # RENAME_NOREPLACE
        assert noreplace.value.errno == errno.EEXIST
        _renameat2(a, b, 2)  # RENAME_EXCHANGE
        assert (a.read_text(), b.read_text()) == ("B", "A")
        os.rename(a, b)  # plain rename replaces atomically
        assert b.read_text() == "B" and not a.exists()

        with pytest.raises(OSError) as fifo:
            os.mkfifo(m.root / "pipe")
        assert fifo.value.errno == errno.ENOTSUP
        with pytest.raises(OSError) as hard:
            os.link(b, m.root / "hard.md")
        assert hard.value.errno == errno.ENOTSUP
        with pytest.raises(OSError) as big:
            os.truncate(b, MAX_MEMORY_SIZE + 1)
        assert big.value.errno == errno.EFBIG
        with pytest.raises(OSError) as badname:
            (m.root / "bad\udcffname.md").write_bytes(b"x")
        assert badname.value.errno == errno.EINVAL
        with pytest.raises(OSError) as xattr_ns:
            os.setxattr(b, "trusted.something", b"x")
        assert xattr_ns.value.errno == errno.ENOTSUP
        with pytest.raises(OSError) as missing_xattr:
            os.getxattr(b, "user.none")
        assert missing_xattr.value.errno == errno.ENODATA
        os.setxattr(b, "user.k", b"v")
        assert os.listxattr(b) == ["user.k"]
        os.removexattr(b, "user.k")
        assert os.listxattr(b) == []
        statfs = os.statvfs(m.root)
        assert statfs.f_namemax == 255 and statfs.f_bavail > 0


def test_unlinked_file_stays_readable_while_open(tmp_path):
    with mounted(tmp_path) as m:
        path = m.root / "doomed.md"
        path.write_text("still here")
        with open(path) as f:
            os.unlink(path)
            assert not path.exists()
            assert f.read() == "still here"


def test_readdir_offsets_survive_concurrent_deletes(tmp_path):
    with mounted(tmp_path) as m:
        names = [f"f{i:03d}.md" for i in range(300)]
        for name in names:
            (m.root / name).write_text(name)
        seen = []
        with os.scandir(m.root) as it:
            for i, entry in enumerate(it):
                seen.append(entry.name)
                if i == 10:
                    for name in names[:200:2]:
                        (m.root / name).unlink()
        assert len(seen) == len(set(seen)), "an entry was listed twice"
        assert set(names[1:200:2]) | set(names[200:]) <= set(seen)


def test_xattrs_are_served_only_when_asked_and_kept_meanwhile(tmp_path):
    """Off by default (one kernel request less per write): "not supported" for
    every call, user.* included, and what an earlier mount stored stays."""
    with mounted(tmp_path, unlock_args=("--xattrs",)) as m:
        f = m.root / "a.md"
        f.write_text("x")
        os.setxattr(f, "user.topic", b"release")
        assert m.lock().returncode == 0
        assert m.unlock().returncode == 0
        for call in (
            lambda: os.getxattr(f, "user.topic"),
            lambda: os.setxattr(f, "user.other", b"v"),
            lambda: os.removexattr(f, "user.topic"),
            lambda: os.listxattr(f),
        ):
            with pytest.raises(OSError) as off:
                call()
            assert off.value.errno == errno.ENOTSUP
        f.write_text("changed while attributes are off")
        os.rename(f, m.root / "b.md")
        assert m.lock().returncode == 0
        assert m.unlock("--xattrs").returncode == 0
        assert os.getxattr(m.root / "b.md", "user.topic") == b"release"
        assert os.listxattr(m.root / "b.md") == ["user.topic"]
