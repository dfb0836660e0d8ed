"""Limits on a real mount: path length across renames, daemon memory for the
largest file."""

from __future__ import annotations

import errno
import os

import pytest

from .fsutil import mounted

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


def test_rename_pushing_a_descendant_past_the_path_limit_is_enametoolong(tmp_path):
    with mounted(tmp_path) as m:
        top = m.root / "d"
        top.mkdir()
        _make_deep_tree(str(top))
        with pytest.raises(OSError) as caught:
            os.rename(top, m.root / ("e" * 100))  # the leaf would be 4124 bytes
        assert caught.value.errno == errno.ENAMETOOLONG
        assert os.listdir(m.root) == ["d"]
        assert _read_deep_leaf(str(top)) == b"deep memory\n"
        assert m.lock().returncode == 0
        assert m.unlock().returncode == 0
        assert os.listdir(m.root) == ["d"]
        assert _read_deep_leaf(str(top)) == b"deep memory\n"
