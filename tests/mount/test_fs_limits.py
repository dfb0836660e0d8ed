"""Limits on a real mount: path length across renames, daemon memory for the
largest file."""

from __future__ import annotations

import errno
import os
import time

import pytest

from ..fsutil import mounted
from ..rawvault import journal_is_empty

NAME = "n" * 250
LEVELS = 16


def _make_deep_tree(top: str) -> None:
    """``top/NAME/.../leaf.md`` (4025 vault bytes) built with dir_fd: below PATH_MAX."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(LEVELS):
        os.mkdir(NAME, dir_fd=fd)
        child = os.open(NAME, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    leaf = os.open("leaf.md", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd)
    os.write(leaf, b"deep memory\n")
    os.close(leaf)
    os.close(fd)


def _read_deep_leaf(top: str) -> bytes:
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(LEVELS):
        assert os.listdir(fd) == [NAME]
        child = os.open(NAME, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = child
    assert os.listdir(fd) == ["leaf.md"]
    leaf = os.open("leaf.md", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    try:
        return os.read(leaf, 100)
    finally:
        os.close(leaf)


def test_paths_inside_the_mount_have_no_limit_but_names_are_enametoolong(tmp_path):
    with mounted(tmp_path) as m:
        top = m.root / "d"
        top.mkdir()
        _make_deep_tree(str(top))
        os.rename(top, m.root / ("e" * 100))  # the leaf's vault path grows past 4,096 bytes
        top = m.root / ("e" * 100)
        assert _read_deep_leaf(str(top)) == b"deep memory\n"
        # A 4,095-byte path relative to a directory inside the mount.
        parts = ["p" * 254] * 16
        relative = "/".join(parts) + "/" + "f" * 15
        assert len(relative.encode()) == 4095
        (m.root / "rel").mkdir()
        base = os.open(m.root / "rel", os.O_RDONLY | os.O_DIRECTORY)
        try:
            at = os.dup(base)
            for part in parts:
                os.mkdir(part, dir_fd=at)
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY, dir_fd=at)
                os.close(at)
                at = inner
            os.close(at)
            leaf = os.open(relative, os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=base)
            os.write(leaf, b"far down")
            os.close(leaf)
            with open(os.open(relative, os.O_RDONLY, dir_fd=base), "rb") as f:
                assert f.read() == b"far down"
        finally:
            os.close(base)
        with pytest.raises(OSError) as caught:
            (m.root / ("n" * 256)).write_bytes(b"x")
        assert caught.value.errno == errno.ENAMETOOLONG
        assert m.lock().returncode == 0
        assert m.unlock().returncode == 0
        assert _read_deep_leaf(str(top)) == b"deep memory\n"


def _memory_mib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of a process, in MiB."""
    found = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) // 1024
    return found


def test_daemon_memory_writing_a_large_file_does_not_follow_its_size(tmp_path):
    """Issue 9: one 256 MiB file took the daemon to 1.8 GB (seven copies on the way).
    In chunks, a write holds the chunks it touches, not the file."""
    size_mib = 256
    chunk = os.urandom(1 << 20)
    with mounted(tmp_path) as m:
        pid = m.daemon_pid()
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")  # reset the peak to the current RSS
        except PermissionError:
            pytest.skip("resetting the daemon's peak RSS needs root (the daemon is not dumpable)")
        before = _memory_mib(pid)["VmRSS"]
        with open(m.root / "big.bin", "wb") as f:
            for _ in range(size_mib):
                f.write(chunk)
        journal = m.vault.with_name(m.vault.name + "-journal")
        deadline = time.monotonic() + 120
        while not journal_is_empty(journal):  # moved into LMDB once the writes pause
            assert time.monotonic() < deadline, "the journal was not moved into LMDB"
            time.sleep(0.2)
        growth = _memory_mib(pid)["VmHWM"] - before
        print(f"peak RSS grew by {growth} MiB writing and flushing a {size_mib} MiB file")
        # Journaled chunks are read back from the journal file, not kept; what
        # grows is a flush's LMDB transaction (its dirty pages, FLUSH_PART_BYTES
        # and more): well below the file's size, and not with it.
        assert growth < size_mib * 3 // 4, f"peak RSS grew by {growth} MiB for {size_mib} MiB"
        with open(m.root / "big.bin", "rb") as f:
            assert all(f.read(1 << 20) == chunk for _ in range(size_mib)) and f.read() == b""
