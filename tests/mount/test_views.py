"""Scoped views (`memvault unlock --subtree DIR [--read-only] MOUNTPOINT`): one
directory of an unlocked vault at a mountpoint of its own, which cannot read,
list or search outside it; a read-only one refuses writes with EROFS."""

from __future__ import annotations

import errno
import json
import os
import time

import pytest

from ..conftest import assert_one_line_error
from ..fsutil import mounted

pytestmark = pytest.mark.model  # the view's search/ asks the daemon's index


def is_mounted(path) -> bool:
    with open("/proc/self/mountinfo") as f:
        return any(line.split()[4] == str(path) for line in f)


def test_a_read_only_view_sees_only_its_subtree(tmp_path):
    with mounted(tmp_path) as m:
        (m.root / "projects" / "api").mkdir(parents=True)
        (m.root / "projects" / "api" / "deploy.md").write_text("# Deploy\nmake release ships it\n")
        (m.root / "projects" / "web").mkdir()
        (m.root / "projects" / "web" / "keys.md").write_text("# Keys\nzanzibar passphrase\n")
        view = tmp_path / "view"
        done = m.cli("unlock", "--subtree", "projects/api", "--read-only", str(view))
        assert done.returncode == 0, done.stderr
        try:
            assert sorted(os.listdir(view)) == ["deploy.md", "search"]
            assert (view / "deploy.md").read_text().startswith("# Deploy")
            assert not (view / "projects").exists() and not (view / "keys.md").exists()
            for attempt in (
                lambda: (view / "new.md").write_text("x"),
                lambda: (view / "deploy.md").write_text("changed"),
                lambda: (view / "deploy.md").unlink(),
                lambda: os.mkdir(view / "dir"),
            ):
                with pytest.raises(OSError) as refused:
                    attempt()
                assert refused.value.errno == errno.EROFS
            assert (m.root / "projects" / "api" / "deploy.md").read_text().endswith("ships it\n")
            hits = json.loads((view / "search" / "zanzibar passphrase.json").read_bytes())
            assert hits["results"] == [], "a search reached outside the view"
            found = json.loads((view / "search" / "make release.json").read_bytes())
            assert [r["path"] for r in found["results"]] == ["deploy.md"]
            assert found["results"][0]["location"] == f"{view}/deploy.md"
            markdown = (view / "search" / "make release").read_text()
            assert f"{view}/deploy.md" in markdown and str(m.root) not in markdown
        finally:
            assert m.cli("lock", str(view)).returncode == 0
        assert not is_mounted(view)


def test_a_writable_view_writes_into_its_subtree_and_ends_with_the_vault(tmp_path):
    with mounted(tmp_path) as m:
        (m.root / "projects" / "api").mkdir(parents=True)
        view = tmp_path / "view"
        done = m.cli("unlock", "--subtree", "projects/api", str(view))
        assert done.returncode == 0, done.stderr
        (view / "notes.md").write_text("# Notes\nscoped\n")
        os.mkdir(view / "adr")
        os.rename(view / "notes.md", view / "adr" / "notes.md")
        assert (m.root / "projects" / "api" / "adr" / "notes.md").read_text() == "# Notes\nscoped\n"
        assert not (m.root / "notes.md").exists()
        with pytest.raises(OSError):
            (view / "search" / "x.md").write_text("no")
        assert m.lock().returncode == 0  # locking the vault ends its views
        deadline = time.monotonic() + 10
        while is_mounted(view) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not is_mounted(view)


def test_a_view_needs_an_unlocked_vault_and_a_directory(tmp_path):
    with mounted(tmp_path) as m:
        (m.root / "file.md").write_text("x")
        line = assert_one_line_error(m.cli("unlock", "--subtree", "file.md", str(tmp_path / "v")))
        assert "not a directory of the vault" in line
        line = assert_one_line_error(m.cli("unlock", "--read-only", str(tmp_path / "v")))
        assert "--subtree" in line
        view = ("--subtree", ".", "--xattrs", str(tmp_path / "v"))
        line = assert_one_line_error(m.cli("unlock", *view))
        assert "--xattrs" in line and "view" in line
    line = assert_one_line_error(m.cli("unlock", "--subtree", "a", str(tmp_path / "v")))
    assert "not unlocked" in line
