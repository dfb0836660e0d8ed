"""Issue 9: a 10 KB `memvault search` query while mounted was an internal
error (ENAMETOOLONG: the CLI asks search/<query> through the mount)."""

from __future__ import annotations

import json
import os

import pytest

from ..conftest import assert_one_line_error
from ..fsutil import mounted

pytestmark = pytest.mark.model  # the real embedding model


def test_long_search_query_while_mounted_is_a_clear_error(tmp_path):
    with mounted(tmp_path) as m:
        (m.root / "deploy.md").write_text("# Deploy\ndeploys go through make release\n")
        long_query = ("why does the deploy fail with this error " * 250)[:10_000]
        line = assert_one_line_error(m.cli("search", long_query))
        assert "too long" in line and "at most 255" in line, line
        short = m.cli("search", "make release", "-k", "3")
        assert short.returncode == 0, short.stderr
        assert b"deploy.md" in short.stdout
        bad = m.cli("search", "make release", "-k", "500")
        line = assert_one_line_error(bad)
        assert bad.returncode == 2 and "k must be a whole number between 1 and 50" in line, line
        scoped = m.cli("search", "--json", "--in", "/ops/", "release.json")
        assert scoped.returncode == 0, scoped.stderr
        assert json.loads(scoped.stdout)["in"] == "ops", "the same query on both sides"
        assert json.loads(scoped.stdout)["query"] == "release.json", "words, not the format"


def test_rename_into_an_indexed_name_makes_a_memory_searchable(tmp_path):
    """What atomic puts (and editors' save-by-rename) rely on: the index follows renames."""
    with mounted(tmp_path) as m:
        (m.root / ".draft.tmp").write_text("# Zebra\nthe zebra crossing protocol\n")
        os.rename(m.root / ".draft.tmp", m.root / "zebra.md")
        found = m.cli("search", "zebra crossing protocol")
        assert found.returncode == 0 and b"zebra.md" in found.stdout, found.stdout
        os.rename(m.root / "zebra.md", m.root / "zebra.bak")
        gone = m.cli("search", "zebra crossing", "-k", "5")  # another query: results are cached
        assert gone.returncode == 0 and b"No memory matches" in gone.stdout, gone.stdout
