"""POSIX points on a real mount, one test each: ENAMETOOLONG, directory times
and link counts, atime, files unlinked while open, ctime."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from .. import rawvault
from ..conftest import after_tick, assert_nowhere
from ..fsutil import mounted


def _later(path) -> None:
    """Wait until the file clock has moved past the times ``path`` shows."""
    seen = os.stat(path, follow_symlinks=False)
    after_tick(max(seen.st_mtime_ns, seen.st_ctime_ns))


def test_a_name_over_255_bytes_is_enametoolong(tmp_path):
    with mounted(tmp_path) as m:
        (m.root / "ok.md").write_text("x")
        for attempt in (
            lambda: (m.root / ("n" * 300)).write_text("x"),
            lambda: (m.root / ("d" * 256)).mkdir(),
            lambda: os.rename(m.root / "ok.md", m.root / ("r" * 256)),
            lambda: os.symlink("ok.md", m.root / ("s" * 1000)),
        ):
            with pytest.raises(OSError) as caught:
                attempt()
            assert caught.value.errno == errno.ENAMETOOLONG
        (m.root / ("n" * 255)).write_text("exactly the limit")
        assert (m.root / ("n" * 255)).read_text() == "exactly the limit"


def test_a_directory_s_times_change_when_its_entries_do(tmp_path):
    with mounted(tmp_path) as m:
        d = m.root / "dir"
        d.mkdir()
        other = m.root / "other"
        other.mkdir()
        changes = [
            ("create", lambda: (d / "a.md").write_text("a")),
            ("mkdir", lambda: (d / "sub").mkdir()),
            ("rename within", lambda: os.rename(d / "a.md", d / "b.md")),
            ("rename out", lambda: os.rename(d / "b.md", other / "b.md")),
            ("rename in", lambda: os.rename(other / "b.md", d / "c.md")),
            ("symlink", lambda: os.symlink("c.md", d / "link")),
            ("unlink", lambda: os.unlink(d / "link")),
            ("rmdir", lambda: (d / "sub").rmdir()),
        ]
        for what, change in changes:
            _later(d)
            before = os.stat(d)
            change()
            after = os.stat(d)
            assert after.st_mtime_ns > before.st_mtime_ns, what
            assert after.st_ctime_ns > before.st_ctime_ns, what
        _later(m.root)
        root_before = os.stat(m.root).st_mtime_ns
        (m.root / "top.md").write_text("in the root")
        assert os.stat(m.root).st_mtime_ns > root_before, "the root too"
        kept = os.stat(d).st_mtime_ns
        assert m.lock().returncode == 0
        assert m.unlock().returncode == 0
        assert os.stat(d).st_mtime_ns == kept, "directory times are stored"


def test_a_directory_s_link_count_is_two_plus_its_subdirectories(tmp_path):
    with mounted(tmp_path) as m:
        d = m.root / "dir"
        d.mkdir()
        assert os.stat(d).st_nlink == 2
        for name in ("a", "b", "c"):
            (d / name).mkdir()
        (d / "file.md").write_text("files do not count")
        assert os.stat(d).st_nlink == 5
        (d / "b").rmdir()
        os.rename(d / "c", m.root / "c")
        assert os.stat(d).st_nlink == 3
        assert os.stat(m.root).st_nlink == 2 + 2  # dir and c
        assert os.stat(d / "file.md").st_nlink == 1


def test_atime_is_stored_and_utimensat_sets_it(tmp_path):
    with mounted(tmp_path) as m:
        f = m.root / "a.md"
        f.write_text("x")
        atime, mtime = 1_400_000_000_123_456_789, 1_500_000_000_987_654_321
        os.utime(f, ns=(atime, mtime))
        st = os.stat(f)
        assert (st.st_atime_ns, st.st_mtime_ns) == (atime, mtime)
        assert f.read_text() == "x"
        assert os.stat(f).st_atime_ns == atime, "reads do not update atime (noatime)"
        assert m.lock().returncode == 0
        assert m.unlock().returncode == 0
        assert os.stat(f).st_atime_ns == atime


def test_a_file_unlinked_while_open_lives_until_its_last_close(tmp_path):
    marker = b"UNLINKED-WHILE-OPEN-" + os.urandom(6).hex().encode()
    with mounted(tmp_path) as m:
        path = m.root / "open.md"
        path.write_bytes(marker + b" first\n")
        fd = os.open(path, os.O_RDWR)
        second = os.open(path, os.O_RDONLY)
        try:
            _later(path)
            ctime = os.fstat(fd).st_ctime_ns
            os.unlink(path)
            assert not path.exists() and os.listdir(m.root) == []
            st = os.fstat(fd)
            assert st.st_nlink == 0 and st.st_ctime_ns > ctime, "link count change: ctime"
            assert os.pread(fd, 100, 0) == marker + b" first\n"
            os.lseek(fd, 0, os.SEEK_END)
            os.write(fd, b"written after the unlink\n")
            assert os.pread(second, 200, 0).endswith(b"written after the unlink\n")
            assert os.fstat(second).st_size == len(marker) + 7 + 25
            path.write_bytes(b"a new file at the same name")
            assert os.pread(fd, 5, 0) == marker[:5], "the new name is another file"
            os.close(second)
            assert os.pread(fd, 5, 0) == marker[:5], "one handle still open"
        finally:
            os.close(fd)
        assert path.read_bytes() == b"a new file at the same name"
        assert m.lock().returncode == 0
    assert_nowhere([marker], m.vault.parent)
    with rawvault.raw(m.vault) as (txn, dbs):
        assert sum(1 for _ in txn.cursor(dbs["records"])) == 1, "only the new file is left"


HOLD_AND_UNLINK = textwrap.dedent(
    """
    import os, sys, time
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o600)
    os.write(fd, bytes.fromhex(sys.argv[2]))
    os.unlink(sys.argv[1])
    print("unlinked", flush=True)
    time.sleep(600)
    """
)


def test_a_file_unlinked_while_open_is_shredded_after_a_killed_daemon(tmp_path):
    marker = b"ORPHAN-OF-A-KILLED-DAEMON-" + os.urandom(6).hex().encode()
    with mounted(tmp_path) as m:
        (m.root / "keep.md").write_text("kept")
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_AND_UNLINK, str(m.root / "o.md"), marker.hex()],
            stdout=subprocess.PIPE,
        )
        try:
            assert holder.stdout.readline() == b"unlinked\n"
            os.kill(m.daemon_pid(), signal.SIGKILL)
        finally:
            holder.kill()
            holder.wait()
        assert m.unlock().returncode == 0  # replays the journal, shreds the orphan
        assert sorted(os.listdir(m.root)) == ["keep.md"]
        assert m.lock().returncode == 0
    assert_nowhere([marker], m.vault.parent)


def test_ctime_changes_on_chmod_chown_rename_and_content(tmp_path):
    with mounted(tmp_path, unlock_args=("--xattrs",)) as m:
        f = m.root / "a.md"
        f.write_text("x")
        for what, change in (
            ("chmod", lambda: os.chmod(f, 0o640)),
            ("chown", lambda: os.chown(f, os.getuid(), os.getgid())),
            ("write", lambda: f.write_text("new content")),
            ("truncate", lambda: os.truncate(f, 3)),
            ("utimensat", lambda: os.utime(f, ns=(1, 2))),
            ("xattr", lambda: os.setxattr(f, "user.k", b"v")),
        ):
            _later(f)
            before = os.stat(f).st_ctime_ns
            change()
            assert os.stat(f).st_ctime_ns > before, what
        _later(f)
        before = os.stat(f).st_ctime_ns
        os.rename(f, m.root / "b.md")
        assert os.stat(m.root / "b.md").st_ctime_ns > before, "rename"
