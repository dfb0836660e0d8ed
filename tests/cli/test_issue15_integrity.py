"""Issue 15, check and salvage: `memvault check` authenticates every record
(even those the unlock snapshot would spare) and names each problem;
`memvault salvage OUT` copies every readable memory into a new vault and
lists the rest, leaving the damaged vault as it was."""

from __future__ import annotations

from memvault.vault import Vault

from ..conftest import FAST_KDF, KDF_ARGS, PASSPHRASE, assert_one_line_error, reopen, run_cli
from ..rawvault import flip_in_file, record_for, split

MEMORIES = {
    "notes/a.md": (b"# A\nJWT keys rotate every thirty days.\n", 0o600, 1_700_000_000_000_000_000),
    "notes/b.md": (b"# B\nDeploys go through make release.\n", 0o640, 1_710_000_000_000_000_000),
    "c.md": (b"# C\nThe staging cluster is in Frankfurt.\n", 0o600, 1_720_000_000_000_000_000),
}


def fill(path) -> None:
    with Vault.create(path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        for name, (data, mode, mtime) in MEMORIES.items():
            vault.put(name, data, mode=mode, mtime_ns=mtime)


def damage(path, memory: str, part: str) -> None:
    """Flip one byte in the middle of a memory's sealed metadata or body."""
    with reopen(path, readonly=True) as vault:
        _, value, _ = record_for(path, vault, memory)
    meta, body = split(value)
    sealed = meta if part == "meta" else body
    flip_in_file(path, sealed, len(sealed) // 2)


def test_a_whole_vault_checks_out(vault_path):
    fill(vault_path)
    done = run_cli("check", vault=vault_path)
    assert done.returncode == 0, done.stderr
    assert "checks out: 3 memories and 1 directories" in done.stderr.decode()


def test_check_finds_damaged_metadata_the_unlock_snapshot_would_not_read(vault_path):
    fill(vault_path)
    damage(vault_path, "notes/b.md", "meta")
    with reopen(vault_path, readonly=True) as vault:  # the snapshot: unlock sees nothing
        assert not vault.damaged
    done = run_cli("check", vault=vault_path)
    assert done.returncode == 7
    assert done.stdout.decode().startswith("notes/b.md: its metadata failed authentication")
    assert "1 problem(s)" in assert_one_line_error(done)


def test_check_names_a_memory_whose_content_fails(vault_path):
    fill(vault_path)
    damage(vault_path, "c.md", "body")
    done = run_cli("check", vault=vault_path)
    assert done.returncode == 7
    assert done.stdout.decode().startswith("c.md: ")
    assert_one_line_error(done)


def test_check_reports_tampered_vectors(vault_path):
    fill(vault_path)
    blob = b"\xf4" + bytes(500)
    with reopen(vault_path) as vault:
        rid = vault.record_id("notes/a.md")
        assert vault.put_derived(rid, vault.stat("notes/a.md").body_gen, blob)
        with vault._store.read() as txn:
            sealed = bytes(txn.get(rid, db="derived"))
    flip_in_file(vault_path, sealed, 30)
    done = run_cli("check", vault=vault_path)
    assert done.returncode == 7
    assert "notes/a.md: its stored vectors fail authentication" in done.stdout.decode()


def test_salvage_copies_every_readable_memory_and_lists_the_rest(vault_path, tmp_path):
    fill(vault_path)
    damage(vault_path, "notes/a.md", "body")
    before = vault_path.read_bytes()
    out = tmp_path / "saved.vault"
    done = run_cli("salvage", str(out), *KDF_ARGS, vault=vault_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().startswith("not saved: notes/a.md (")
    assert "Saved 2 memories" in done.stderr.decode()
    assert vault_path.read_bytes() == before, "the damaged vault is left as it was"
    with reopen(out, readonly=True) as saved:
        files = {
            m.path: (saved.get(m.path), m.mode, m.mtime_ns)
            for m in saved.walk()
            if m.type == "file"
        }
    assert files == {k: v for k, v in MEMORIES.items() if k != "notes/a.md"}
    again = run_cli("salvage", str(out), *KDF_ARGS, vault=vault_path)
    assert again.returncode != 0 and "already exists" in assert_one_line_error(again)
