"""Changes racing each other on a real mount: a commit must land on the record
it belongs to, never on whatever now sits at the path it was opened under."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from ..fsutil import mounted

TRIES = 20
BIG = 32 << 20
"""Far above the 64 KiB under which commits run inline: copying and sealing it
keeps the commit thread busy long enough for the race to show on most runs."""


def _close_racing(fd: int, action, delay: float) -> None:
    """close(fd) while another thread runs ``action`` about ``delay`` seconds in."""
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def other() -> None:
        start.wait()
        time.sleep(delay)
        try:
            action()
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    thread = threading.Thread(target=other)
    thread.start()
    start.wait()
    os.close(fd)
    thread.join()
    assert not errors, errors


def _delay(i: int) -> float:
    """A sweep over the first 20 ms of close(), where the commit reads the path."""
    return (i % 10) * 0.002


def test_unlink_racing_a_large_close_stays_unlinked(tmp_path):
    content = os.urandom(BIG)
    with mounted(tmp_path) as m:
        removed: list[Path] = []
        for i in range(TRIES):
            path = m.root / f"doomed-{i}.bin"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(fd, content)
            _close_racing(fd, lambda path=path: os.unlink(path), _delay(i))
            assert not path.exists(), f"try {i}: an unlinked file came back"
            removed.append(path)
        assert os.listdir(m.root) == []
        assert m.lock().returncode == 0
        assert m.unlock().returncode == 0
        assert os.listdir(m.root) == [], "an unlinked file came back after remount"


def test_rename_racing_a_large_close_moves_the_new_content(tmp_path):
    old, new = b"old content\n", os.urandom(BIG)
    with mounted(tmp_path) as m:
        for i in range(TRIES):
            a, b = m.root / f"a-{i}.bin", m.root / f"b-{i}.bin"
            a.write_bytes(old)
            fd = os.open(a, os.O_WRONLY | os.O_TRUNC)
            os.write(fd, new)
            _close_racing(fd, lambda a=a, b=b: os.rename(a, b), _delay(i))
            assert not a.exists(), f"try {i}: the new content appeared at the old path"
            assert b.read_bytes() == new, f"try {i}: the renamed file lost what close wrote"
        assert m.lock().returncode == 0
        assert m.unlock().returncode == 0
        names = sorted(os.listdir(m.root))
        assert names == sorted(f"b-{i}.bin" for i in range(TRIES))
        assert all((m.root / name).read_bytes() == new for name in names)


def test_writes_racing_a_large_commit_of_the_same_file_are_kept(tmp_path):
    """A commit encrypts the open file's buffer itself: a write through another
    descriptor meanwhile (here one that extends the file) must neither fail
    nor be lost."""
    first, more = os.urandom(BIG), os.urandom(1 << 20)
    with mounted(tmp_path) as m:
        for i in range(TRIES // 2):
            path = m.root / f"shared-{i}.bin"
            closing = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            os.write(closing, first)
            other = os.open(path, os.O_WRONLY)
            try:
                _close_racing(closing, lambda fd=other: os.pwrite(fd, more, BIG), _delay(2 * i))
            finally:
                os.close(other)
            assert path.read_bytes() == first + more, f"try {i}: a racing write was lost"
