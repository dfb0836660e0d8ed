"""A mount's write() to a small file takes a short path (Writer.put_small): it
must commit exactly what the general path commits, and survive what that does."""

from __future__ import annotations

import textwrap

from memvault.vault import Vault
from memvault.vault.bodies import CHUNK_SIZE
from memvault.vault.records import FILE

from ..conftest import FAST_KDF, PASSPHRASE, reopen
from .test_journal import run_until_killed


def journal_vault(vault_path) -> Vault:
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    return reopen(vault_path, journal=True)


def last_entry(vault: Vault) -> list[tuple[int, str, int]]:
    """The last journaled commit's operations: (database, kind, key length)."""
    return sorted((op.db, op.kind, len(op.key)) for op in vault._store._pending[-1])


def commit_through(vault: Vault, record_id: bytes, content: bytes, *, short: bool) -> tuple:
    """Write ``content`` as the file's whole body by one path or the other; what it stored."""
    taken = []
    put_small = vault._writer.put_small

    def watch(entry, data):
        result = put_small(entry, data) if short else None
        taken.append(result is not None)
        return result

    vault._writer.put_small = watch
    try:
        events = len(vault._writer.audit.pending)
        meta = vault.write_chunks(record_id, {0: content}, len(content))
    finally:
        vault._writer.put_small = put_small
    assert taken == [short]
    ops = [e.op for e in vault._writer.audit.pending[events:]]
    return meta, last_entry(vault), ops, vault._writer.compaction_owed


def test_the_short_path_commits_what_the_general_path_commits(vault_path):
    with journal_vault(vault_path) as vault:
        vault.put("first.md", b"drops the snapshot stored at the last lock")
        results = {}
        for short in (True, False):
            rid, _ = vault.create_in(None, f"{short}.md", FILE, mode=0o640, opened=True)
            vault._writer.compaction_owed = False
            first = commit_through(vault, rid, b"first version", short=short)
            second = commit_through(vault, rid, b"first version, appended", short=short)
            results[short] = (first, second)
        for (meta, *rest), (general_meta, *general_rest) in zip(
            results[True], results[False], strict=True
        ):
            assert rest == general_rest  # the same operations, audit events, compaction owed
            for field in ("type", "mode", "size", "gen", "body_gen", "chunked", "uid", "gid"):
                assert getattr(meta, field) == getattr(general_meta, field), field
        assert results[True][0][2] == ["create"] and results[True][1][2] == ["write"]
        assert results[True][1][3] is True  # the old version is in LMDB's free pages
        assert vault.get("True.md") == vault.get("False.md") == b"first version, appended"
    with reopen(vault_path, verify_every_record=True) as again:  # the integrity sum holds
        assert again.get("True.md") == b"first version, appended"
        assert again.stat("True.md").mode == 0o640


def test_the_short_path_leaves_other_cases_to_the_general_one(vault_path):
    with journal_vault(vault_path) as vault:
        big, _ = vault.create_in(None, "big.bin", FILE, mode=0o644, opened=True)
        one, _ = vault.create_in(None, "one.md", FILE, mode=0o644, opened=True)
        two, _ = vault.create_in(None, "two.md", FILE, mode=0o644, opened=True)
        entry = vault._tree.of(one)
        assert vault._writer.put_small(entry, b"x") is None  # another file is staged too
        vault.write_chunks(one, {0: b"one"}, 3)  # stores all three
        assert not vault._writer.staged
        assert vault._writer.put_small(vault._tree.of(big), b"y" * (CHUNK_SIZE + 1)) is None
        vault.write_chunks(big, {0: b"y" * CHUNK_SIZE, 1: b"y"}, CHUNK_SIZE + 1)
        assert vault._writer.put_small(vault._tree.of(big), b"small again") is None  # chunked
        assert vault.get("two.md") == b""


KILLED_EDITS = textwrap.dedent(
    """
    import os, sys
    from memvault.vault import Vault
    v = Vault.open(sys.argv[1], sys.argv[2].encode(), compact_delay=None, journal=True)
    v.put("notes.md", b"stored version")
    v._writer._flush_soon()  # in LMDB, under a sealed state
    rid = v._tree.by_path["notes.md"].record_id
    body = b"stored version"
    for i in range(25):
        body += b" edit %d" % i
        v.write_chunks(rid, {0: body}, len(body))
    assert not v._writer.staged and v._writer.unsealed
    print(len(body), flush=True)
    os.kill(os.getpid(), 9)
    """
)


def test_small_writes_a_killed_writer_journaled_are_replayed_and_counted(vault_path):
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    done = run_until_killed(KILLED_EDITS, vault_path)
    expected = b"stored version" + b"".join(b" edit %d" % i for i in range(25))
    assert int(done.stdout) == len(expected)
    with reopen(vault_path) as again:  # no integrity failure: the unsealed tail is counted
        assert again.get("notes.md") == expected
        assert any(e.op == "replay" and e.path == "notes.md" for e in again.audit_trail())
    with reopen(vault_path) as again:
        assert again.get("notes.md") == expected
