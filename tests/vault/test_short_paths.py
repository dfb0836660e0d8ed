"""A mount's write() to a small file and its unlink of one take short paths
(Writer.put_small, Writer.shred_small): each must commit exactly what the
general path commits, and survive what that does."""

from __future__ import annotations

import textwrap

from memvault.vault import Vault
from memvault.vault.bodies import CHUNK_SIZE
from memvault.vault.records import DIRECTORY, FILE

from ..conftest import FAST_KDF, PASSPHRASE, after_tick, reopen
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
        vault.catch_up()  # the bookkeeping a mount does once it has replied (later.py)
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


def through(vault: Vault, method: str, change, *, short: bool) -> tuple:
    """Make ``change`` with the writer's short path ``method`` taken or declined
    (None, or False for shred_small); what it stored."""
    taken = []
    short_path = getattr(vault._writer, method)
    declined = False if method == "shred_small" else None

    def watch(*args):
        result = short_path(*args) if short else declined
        taken.append(result is not None and result is not False)
        return result

    setattr(vault._writer, method, watch)
    try:
        events = len(vault._writer.audit.pending)
        change()
        vault.catch_up()  # the bookkeeping a mount does once it has replied (later.py)
    finally:
        setattr(vault._writer, method, short_path)
    assert taken == [short]
    ops = [(e.op, e.path) for e in vault._writer.audit.pending[events:]]
    return last_entry(vault), ops, vault._writer.compaction_owed, vault._writer.pending_shreds


def shred_through(vault: Vault, path: str, *, short: bool) -> tuple:
    """Unlink ``path`` by one path or the other; what it stored."""

    def unlink() -> None:
        vault.remove_record(vault.record_id(path), directory=False)

    return through(vault, "shred_small", unlink, short=short)


def test_the_short_shred_commits_what_the_general_path_commits(vault_path):
    with journal_vault(vault_path) as vault:
        vault.put("first.md", b"drops the snapshot stored at the last lock")
        vault.mkdir("d")
        results = {}
        for short in (True, False):
            for path in (f"d/{short}.md", f"{short}.md"):
                vault.put(path, b"shredded by one path or the other")
                vault._writer.compaction_owed = False
                vault._writer.pending_shreds = 0
                before = vault.stat(paths_parent(path)).mtime_ns
                after_tick(before)
                results[short, path.startswith("d/")] = shred_through(vault, path, short=short)
                assert vault.stat(paths_parent(path)).mtime_ns > before  # POSIX: its directory
                assert not vault.exists(path)
        for inside in (True, False):
            entry, ops, owed, shreds = results[True, inside]
            general_entry, general_ops, *general_rest = results[False, inside]
            assert entry == general_entry  # the same operations
            assert [op for op, _ in ops] == [op for op, _ in general_ops] == ["shred"]
            assert [owed, shreds] == general_rest == [True, 1]
        assert vault.get("first.md")
    with reopen(vault_path, verify_every_record=True) as again:  # the integrity sum holds
        assert [m.path for m in again.walk()] == ["d", "first.md"]


def paths_parent(path: str) -> str:
    return path.rpartition("/")[0] or "/"


def test_the_short_shred_leaves_other_cases_to_the_general_one(vault_path):
    with journal_vault(vault_path) as vault:
        vault.put("stored.md", b"stored")
        big = b"y" * (CHUNK_SIZE + 1)
        vault.put("big.bin", big)
        vault.mkdir("empty")
        writer, tree = vault._writer, vault._tree
        assert not writer.shred_small(tree.at("big.bin"))  # chunked
        assert not writer.shred_small(tree.at("empty"))  # a directory
        assert tree.at("empty").meta.type == DIRECTORY
        staged, _ = vault.create_in(None, "staged.md", FILE, mode=0o644, opened=True)
        vault.catch_up()  # staged once the create's work left for later is done (later.py)
        assert not writer.shred_small(tree.at("stored.md"))  # a file is staged
        vault.remove_record(staged, directory=False)
        assert writer.shred_small(tree.at("stored.md"))
        vault.remove_record(vault.record_id("big.bin"), directory=False)
        assert [m.path for m in vault.walk()] == ["empty"]
    with reopen(vault_path, verify_every_record=True) as again:
        assert [m.path for m in again.walk()] == ["empty"]


KILLED_SHREDS = textwrap.dedent(
    """
    import os, sys
    from memvault.vault import Vault
    v = Vault.open(sys.argv[1], sys.argv[2].encode(), compact_delay=None, journal=True)
    for i in range(10):
        v.put(f"n{i}.md", b"stored %d" % i)
    v._writer._flush_soon()  # in LMDB, under a sealed state
    for i in range(0, 10, 2):
        assert v._writer.shred_small(v._tree.by_path[f"n{i}.md"])
    assert v._writer.unsealed
    print("shredded", flush=True)
    os.kill(os.getpid(), 9)
    """
)


def test_short_shreds_a_killed_writer_journaled_are_replayed_and_counted(vault_path):
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    assert run_until_killed(KILLED_SHREDS, vault_path).stdout == b"shredded\n"
    with reopen(vault_path) as again:  # no integrity failure: the unsealed tail is counted
        assert [m.path for m in again.walk()] == [f"n{i}.md" for i in range(1, 10, 2)]
        assert any(e.op == "replay" for e in again.audit_trail())
    with reopen(vault_path, verify_every_record=True) as again:
        assert again.get("n9.md") == b"stored 9"


def move_through(vault: Vault, src: str, dst: str, *, short: bool) -> tuple:
    """Rename ``src`` over ``dst`` by one path or the other; what it stored."""
    return through(vault, "move_small", lambda: vault.rename(src, dst), short=short)


def test_the_short_move_commits_what_the_general_path_commits(vault_path):
    with journal_vault(vault_path) as vault:
        vault.put("first.md", b"drops the snapshot stored at the last lock")
        vault.mkdir("d")
        results = {}
        for short in (True, False):
            for over in (True, False):
                src, dst = f"d/.{short}{over}.tmp", f"{short}{over}.md"
                vault.put(src, b"the new version")
                if over:
                    vault.put(dst, b"the old version, shredded")
                vault._writer.compaction_owed = False
                vault._writer.pending_shreds = 0
                before = vault.stat("d").mtime_ns, vault.stat("/").mtime_ns
                after_tick(max(before))
                results[short, over] = move_through(vault, src, dst, short=short)
                assert vault.stat("d").mtime_ns > before[0]  # POSIX: both directories
                assert vault.stat("/").mtime_ns > before[1]
                assert vault.get(dst) == b"the new version" and not vault.exists(src)
        for over in (True, False):
            entry, ops, *rest = results[True, over]
            general_entry, general_ops, *general_rest = results[False, over]
            assert entry == general_entry  # the same operations
            assert [op for op, _ in ops] == [op for op, _ in general_ops]
            assert rest == general_rest == [True, int(over)]
        assert [op for op, _ in results[True, True][1]] == ["rename", "shred"]
    with reopen(vault_path, verify_every_record=True) as again:  # the integrity sum holds
        assert again.get("TrueTrue.md") == again.get("FalseFalse.md") == b"the new version"
        assert sorted(m.path for m in again.walk()) == [
            "FalseFalse.md",
            "FalseTrue.md",
            "TrueFalse.md",
            "TrueTrue.md",
            "d",
            "first.md",
        ]


def test_the_short_move_leaves_other_cases_to_the_general_one(vault_path):
    with journal_vault(vault_path) as vault:
        vault.put("a.md", b"a")
        vault.put("big.bin", b"y" * (CHUNK_SIZE + 1))
        vault.mkdir("dir")
        writer, tree = vault._writer, vault._tree
        now = 1
        assert writer.move_small(tree.at("dir"), "dir2", None, now) is None  # a directory
        assert writer.move_small(tree.at("a.md"), "big.bin", tree.at("big.bin"), now) is None
        assert writer.move_small(tree.at("a.md"), "dir", tree.at("dir"), now) is None
        staged, _ = vault.create_in(None, "staged.md", FILE, mode=0o644, opened=True)
        vault.catch_up()
        assert writer.move_small(tree.at("a.md"), "b.md", None, now) is None  # a file is staged
        vault.rename("staged.md", "dir/staged.md")  # general: stores it
        vault.rename("a.md", "new/deeper/a.md")  # general: creates the directories
        move_through(vault, "big.bin", "dir/big.bin", short=True)  # a chunked file moves too
        assert vault.get("dir/big.bin") == b"y" * (CHUNK_SIZE + 1)
        assert vault.get("new/deeper/a.md") == b"a" and vault.get("dir/staged.md") == b""
    with reopen(vault_path, verify_every_record=True) as again:
        assert sorted(m.path for m in again.walk()) == [
            "dir",
            "dir/big.bin",
            "dir/staged.md",
            "new",
            "new/deeper",
            "new/deeper/a.md",
        ]


KILLED_MOVES = textwrap.dedent(
    """
    import os, sys
    from memvault.vault import Vault
    v = Vault.open(sys.argv[1], sys.argv[2].encode(), compact_delay=None, journal=True)
    for i in range(5):
        v.put(f"n{i}.md", b"old %d" % i)
    v._writer._flush_soon()  # in LMDB, under a sealed state
    for i in range(5):
        v.put(f".n{i}.tmp", b"new %d" % i)
        v.rename(f".n{i}.tmp", f"n{i}.md")
    assert v._writer.unsealed and not v._writer.staged
    print("saved", flush=True)
    os.kill(os.getpid(), 9)
    """
)


def test_short_moves_a_killed_writer_journaled_are_replayed_and_counted(vault_path):
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    assert run_until_killed(KILLED_MOVES, vault_path).stdout == b"saved\n"
    with reopen(vault_path) as again:  # no integrity failure: the unsealed tail is counted
        assert [m.path for m in again.walk()] == [f"n{i}.md" for i in range(5)]
        assert again.get("n3.md") == b"new 3"
        assert any(e.op == "replay" for e in again.audit_trail())
    with reopen(vault_path, verify_every_record=True) as again:
        assert again.get("n4.md") == b"new 4"
