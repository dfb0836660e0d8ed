"""Issue 9: `memvault ls -R` through the mount on a legal 2,046-deep tree was
an internal error (RecursionError); the mounted CLI never recurses."""

from __future__ import annotations

from memvault.vault import Vault

from ..conftest import PASSPHRASE
from ..fsutil import mounted

DEPTH = 2046  # 2,046 one-character directories: 4,091 bytes, within the 4,096-byte limit


def test_ls_recursive_on_a_2046_deep_tree_while_mounted(tmp_path):
    deep = "/".join(["d"] * DEPTH)
    with mounted(tmp_path) as m:
        assert m.lock().returncode == 0
        with Vault.open(m.vault, PASSPHRASE, compact_delay=None) as v:
            v.mkdir(deep, parents=True)
            v.put("top.md", b"top\n")
        assert m.unlock().returncode == 0
        listing = m.cli("ls", "-R", timeout=120)
        assert listing.returncode == 0, listing.stderr
        lines = listing.stdout.decode().splitlines()
        assert len(lines) == DEPTH + 1
        assert lines[0] == "d/" and "top.md" in lines
        assert f"{deep}/" in lines
        below = m.cli("ls", "-R", "d/d/d", timeout=120)
        assert below.returncode == 0, below.stderr
        assert len(below.stdout.decode().splitlines()) == DEPTH - 3


def test_mounted_cli_moves_and_shreds_nested_trees(tmp_path):
    """The descriptor-based walk and rm -r (iterative, fresh handles after each rmdir)."""
    nested = "/".join(["n"] * 40)
    with mounted(tmp_path) as m:
        for i in range(3):
            assert m.cli("put", f"{nested}/f{i}.md", input=b"x").returncode == 0
            assert m.cli("put", f"n/side{i}/g.md", input=b"y").returncode == 0
        assert m.cli("mv", f"{nested}/f0.md", "elsewhere/f0.md").returncode == 0
        assert m.cli("get", "elsewhere/f0.md").stdout == b"x"
        assert len(m.cli("ls", "-R", "n").stdout.splitlines()) == 39 + 2 + 6
        gone = m.cli("rm", "-r", "n")
        assert gone.returncode == 0, gone.stderr
        assert b"(48 record(s))" in gone.stderr, gone.stderr
        assert m.cli("ls", "-R").stdout == b"elsewhere/\nelsewhere/f0.md\n"
