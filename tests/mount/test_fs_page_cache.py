"""The pages the mount hands the kernel when a small file is opened and the
kernel's cache lacks them (fs/operations.py, open): reads are answered from
the kernel's cache, and what it serves is never older than the file."""

from __future__ import annotations

import os
import subprocess
import time

from ..conftest import after_tick
from ..fsutil import cached_pages, mounted


def _cached(paths, at_least: int, timeout: float = 10.0) -> int:
    """How many of the files have their page in the kernel's cache (each opened to
    look, which hands it over), once at least ``at_least`` do or ``timeout``
    passed."""
    deadline = time.monotonic() + timeout
    while True:
        found = sum(cached_pages(path) for path in paths)
        if found >= at_least or time.monotonic() > deadline:
            return found
        time.sleep(0.01)


def test_a_small_file_written_and_closed_is_read_from_the_kernels_cache(tmp_path):
    with mounted(tmp_path) as m:
        files = {m.root / f"note{i}.md": f"# note {i}\n".encode() * (i + 3) for i in range(10)}
        for path, content in files.items():
            path.write_bytes(content)
        # Kept through a stat while the kernel's clock and the vault's gave the
        # write one mtime: when both fall in one tick (4 ms), as they almost
        # always do.
        half = len(files) // 2
        assert _cached(files, half) >= half, "the opened files' pages are not in the cache"
        for path in files:
            os.stat(path)  # a GETATTR: the kernel drops the pages if it sees a new mtime
        assert _cached(files, half, timeout=0) >= half, "a stat dropped the pages"
        for path, content in files.items():
            assert path.read_bytes() == content


def test_what_the_kernel_keeps_is_never_older_than_the_file(tmp_path):
    with mounted(tmp_path) as m:
        note = m.root / "note.md"
        note.write_bytes(b"first version\n")
        assert note.read_bytes() == b"first version\n"

        after_tick()
        with open(note, "ab") as f:  # appended in a later tick: a new mtime
            f.write(b"appended\n")
        assert note.read_bytes() == b"first version\nappended\n"
        read_by_another = subprocess.run(["cat", str(note)], capture_output=True, check=True)
        assert read_by_another.stdout == b"first version\nappended\n"

        note.write_bytes(b"rewritten at once\n")  # O_TRUNC, maybe within the same tick
        assert note.read_bytes() == b"rewritten at once\n"

        tmp = m.root / ".note.md.tmp"  # an editor's save: a new file renamed over it
        tmp.write_bytes(b"saved by an editor\n")
        os.rename(tmp, note)
        assert note.read_bytes() == b"saved by an editor\n"

        with open(note, "r+b") as a, open(note, "rb") as b:  # two handles on one file
            a.write(b"SAVED")
            a.flush()
            assert b.read() == b"SAVED by an editor\n"
        assert note.read_bytes() == b"SAVED by an editor\n"

        note.unlink()  # shredded: a file of the same name is another file
        note.write_bytes(b"new\n")
        assert note.read_bytes() == b"new\n"
        os.truncate(note, 2)  # by path, without an open handle
        assert note.read_bytes() == b"ne"
