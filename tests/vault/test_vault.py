"""The Vault API on real LMDB files: paths, directories, moves, shreds, growth."""

from __future__ import annotations

import errno
import multiprocessing

import pytest

from memvault import errors
from memvault.vault import Vault, clock

from ..conftest import FAST_KDF, PASSPHRASE, reopen, run_cli


def test_put_get_stat_list(vault):
    vault.put("projects/api.md", b"# API\n- deploys go through make release\n")
    vault.put("notes.md", b"top")
    assert vault.get("projects/api.md").startswith(b"# API")
    assert vault.get("/projects/api.md/") == vault.get("projects/api.md")
    meta = vault.stat("projects/api.md")
    assert meta.size == 40 and meta.mtime_ns > 0 and meta.ctime_ns > 0
    assert [(n, m.is_dir) for n, m in vault.list()] == [("notes.md", False), ("projects", True)]
    assert [n for n, _ in vault.list("projects")] == ["api.md"]
    assert len(vault) == 2


def test_file_times_are_the_kernels_coarse_clock(vault):
    """As ext4 stamps them (vault/clock.py): a tick behind the fine clock, mostly."""
    before = clock.now_ns()
    meta = vault.put("a.md", b"one")
    assert before <= meta.mtime_ns == meta.ctime_ns <= clock.now_ns()


def test_overwrite_keeps_identity_and_bumps_times(vault):
    first = vault.put("a.md", b"one")
    second = vault.put("a.md", b"two, longer", mtime_ns=first.mtime_ns + 10**9)
    assert vault.get("a.md") == b"two, longer"
    assert second.size == 11 and second.gen > first.gen
    assert second.mtime_ns == first.mtime_ns + 10**9


def test_everything_survives_reopen(vault_path, vault):
    content = {f"dir{i % 3}/sub/file{i}.md": f"memory {i}".encode() * (i + 1) for i in range(20)}
    for path, data in content.items():
        vault.put(path, data)
    vault.mkdir("empty/dir", parents=True)
    vault.set_attrs("dir0/sub/file0.md", mode=0o640, mtime_ns=1_234_567_890_000_000_000)
    vault.close()
    with reopen(vault_path) as again:
        for path, data in content.items():
            assert again.get(path) == data
        assert again.stat("empty/dir").is_dir
        meta = again.stat("dir0/sub/file0.md")
        assert meta.mode == 0o640 and meta.mtime_ns == 1_234_567_890_000_000_000


def test_rename_file_and_directory_tree(vault_path, vault):
    vault.put("a/b/c.md", b"c")
    vault.put("a/d.md", b"d")
    vault.rename("a/b/c.md", "a/c2.md")
    assert vault.get("a/c2.md") == b"c"
    with pytest.raises(errors.MemoryNotFound):
        vault.get("a/b/c.md")
    vault.rename("a", "z/y")
    assert vault.get("z/y/c2.md") == b"c" and vault.get("z/y/d.md") == b"d"
    assert [n for n, _ in vault.list()] == ["z"]
    vault.close()
    with reopen(vault_path) as again:
        assert sorted(m.path for m in again.walk()) == [
            "z",
            "z/y",
            "z/y/b",
            "z/y/c2.md",
            "z/y/d.md",
        ]


def test_rename_replaces_existing_file(vault):
    vault.put("x.md", b"new")
    vault.put("y.md", b"old")
    vault.rename("x.md", "y.md")
    assert vault.get("y.md") == b"new"
    assert not vault.exists("x.md")
    with pytest.raises(errors.AlreadyExists):
        vault.put("p.md", b"p") and vault.rename("p.md", "y.md", replace_existing=False)


def test_rename_errors(vault):
    vault.put("d/f.md", b"f")
    vault.mkdir("e")
    vault.put("e/g.md", b"g")
    with pytest.raises(errors.InvalidMove):
        vault.rename("d", "d/inner")
    with pytest.raises(errors.DirectoryNotEmpty):
        vault.rename("d", "e")
    with pytest.raises(errors.IsADirectory):
        vault.rename("d/f.md", "e")
    with pytest.raises(errors.MemoryNotFound):
        vault.rename("nope.md", "x.md")


def test_delete_file_and_tree(vault):
    vault.put("t/a.md", b"a")
    vault.put("t/u/b.md", b"b")
    vault.delete("t/a.md")
    assert not vault.exists("t/a.md")
    with pytest.raises(errors.DirectoryNotEmpty):
        vault.delete("t")
    assert vault.delete("t", recursive=True) == 3
    assert vault.list() == []


@pytest.mark.parametrize(
    "bad", ["", "/", "..", "a/../b", "./a", "a//b", "a/\0b", "x" * 256, "search/q"]
)
def test_bad_paths_are_refused(vault, bad):
    with pytest.raises(errors.BadPath):
        vault.put(bad, b"data")


def test_file_and_directory_conflicts(vault):
    vault.put("f.md", b"f")
    with pytest.raises(errors.NotADirectory):
        vault.put("f.md/child.md", b"c")
    vault.mkdir("d")
    with pytest.raises(errors.IsADirectory):
        vault.put("d", b"x")
    with pytest.raises(errors.IsADirectory):
        vault.get("d")
    with pytest.raises(errors.AlreadyExists):
        vault.mkdir("d")
    with pytest.raises(errors.MemoryNotFound):
        vault.mkdir("missing/child")


def test_binary_and_empty_content(vault):
    blob = bytes(range(256)) * 50
    vault.put("bin/blob", blob)
    vault.put("bin/empty", b"")
    assert vault.get("bin/blob") == blob
    assert vault.get("bin/empty") == b""


def test_too_large_is_refused(vault, monkeypatch):
    from memvault.vault import core as vault_module

    monkeypatch.setattr(vault_module, "MAX_MEMORY_SIZE", 1000)
    with pytest.raises(errors.TooLarge):
        vault.put("big.md", b"x" * 1001)


def test_map_grows_on_demand(vault_path):
    # Start with a 64 KiB map: far smaller than what is written.
    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, map_size=64 << 10) as v:
        for i in range(60):
            v.put(f"m/{i}.md", bytes([i]) * 20_000)
        v.compact()
        assert v.get("m/59.md") == bytes([59]) * 20_000
    with reopen(vault_path, map_size=64 << 10) as again:
        assert len(again) == 60
        again.put("one-more.md", b"z" * 50_000)


def test_wrong_passphrase_is_refused(vault_path, vault):
    vault.close()
    with pytest.raises(errors.WrongPassphrase):
        Vault.open(vault_path, b"not it")


def test_missing_vault_and_existing_vault(vault_path, vault, tmp_path):
    with pytest.raises(errors.VaultNotFound):
        Vault.open(tmp_path / "nope.vault", PASSPHRASE)
    with pytest.raises(errors.VaultExists):
        Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF)


def test_not_a_vault(tmp_path):
    junk = tmp_path / "junk.vault"
    junk.write_bytes(b"this is not an LMDB file" * 500)
    with pytest.raises(errors.NotAVault):
        Vault.open(junk, PASSPHRASE)


def _try_open(path: str, queue) -> None:
    try:
        Vault.open(path, PASSPHRASE).close()
        queue.put("opened")
    except errors.VaultInUse as exc:
        queue.put(str(exc))


def test_second_writer_process_is_refused(vault_path, vault):
    queue = multiprocessing.get_context("spawn").Queue()
    proc = multiprocessing.get_context("spawn").Process(
        target=_try_open, args=(str(vault_path), queue)
    )
    proc.start()
    proc.join(60)
    message = queue.get(timeout=5)
    assert "in use by another memvault process" in message
    assert f"pid {__import__('os').getpid()}" in message
    with pytest.raises(errors.VaultInUse):
        Vault.open(vault_path, PASSPHRASE, readonly=True)


def test_readonly_vault_refuses_changes(vault_path, vault):
    vault.put("a.md", b"a")
    vault.close()
    with reopen(vault_path, readonly=True) as ro:
        assert ro.get("a.md") == b"a"
        with pytest.raises(errors.ReadOnlyVault):
            ro.put("b.md", b"b")
        # Readers share the vault: a reader in another process is fine.
        result = run_cli("get", "a.md", vault=vault_path)
        assert result.returncode == 0 and result.stdout == b"a"


def test_close_wipes_keys(vault):
    vault.put("a.md", b"a")
    entry = vault._tree.by_path["a.md"]
    master = vault._sealer._master
    vault.close()
    assert master == bytearray(32)
    assert entry.data_key == bytearray(32)


def test_put_many_is_one_transaction(vault_path, vault):
    metas = vault.put_many([("b/x.md", b"1"), ("b/c/y.md", b"2"), ("b/x.md", b"3"), ("z.md", b"")])
    assert [m.path for m in metas] == ["b/x.md", "b/c/y.md", "z.md"]
    assert vault.get("b/x.md") == b"3"
    with pytest.raises(errors.NotADirectory):
        vault.put_many([("fresh.md", b"ok"), ("z.md/child.md", b"bad")])
    assert not vault.exists("fresh.md"), "a failed batch must leave nothing behind"
    vault.close()
    with reopen(vault_path) as again:
        assert [m.path for m in again.walk()] == ["b", "b/c", "b/c/y.md", "b/x.md", "z.md"]


def test_exchange_swaps_files_and_trees(vault_path, vault):
    vault.put("a/x.md", b"ax")
    vault.put("b.md", b"b")
    ida, idb = vault.record_id("a"), vault.record_id("b.md")
    vault.exchange("a", "b.md")
    assert vault.get("b.md/x.md") == b"ax" and vault.get("a") == b"b"
    assert vault.record_id("b.md") == ida and vault.record_id("a") == idb
    with pytest.raises(errors.InvalidMove):
        vault.exchange("b.md", "b.md/x.md")
    vault.close()
    with reopen(vault_path) as again:
        assert again.get("b.md/x.md") == b"ax" and again.get("a") == b"b"


def test_put_record_after_delete_or_rename_never_recreates_the_old_path(vault_path, vault):
    """Issue 9: a commit by record id follows a rename and fails after a shred."""
    vault.put("moved.md", b"old")
    vault.put("gone.md", b"old")
    moved, gone = vault.record_id("moved.md"), vault.record_id("gone.md")
    vault.rename("moved.md", "dir/new-name.md")
    vault.delete("gone.md")
    meta = vault.put_record(moved, b"new content")
    assert meta.path == "dir/new-name.md" and meta.size == 11
    assert vault.get("dir/new-name.md") == b"new content"
    assert vault.get_record(moved) == b"new content"
    with pytest.raises(errors.MemoryNotFound):
        vault.put_record(gone, b"resurrected?")
    with pytest.raises(errors.MemoryNotFound):
        vault.get_record(gone)
    with pytest.raises(errors.IsADirectory):
        vault.put_record(vault.record_id("dir"), b"x")
    assert not vault.exists("moved.md") and not vault.exists("gone.md")
    vault.close()
    with reopen(vault_path) as again:
        assert [m.path for m in again.walk()] == ["dir", "dir/new-name.md"]
        assert again.get("dir/new-name.md") == b"new content"


def test_paths_have_no_length_limit_but_names_stop_at_255_bytes(vault_path, vault):
    """Issue 11: only a name is limited (ENAMETOOLONG); a path is as long as its tree."""
    deep = "/".join(["d", *(["n" * 250] * 16), "leaf.md"])  # 4,025 bytes
    vault.put(deep, b"deep")
    vault.rename("d", "e" * 200)  # the leaf's path becomes 4,224 bytes
    longer = "e" * 200 + deep[1:]
    assert vault.get(longer) == b"deep"
    vault.put(longer.replace("leaf.md", "n" * 255 + "/" + "m" * 255 + "/x.md"), b"deeper")
    with pytest.raises(errors.PathTooLong) as caught:
        vault.put("dir/" + "x" * 256, b"too long a name")
    assert caught.value.errno == errno.ENAMETOOLONG
    vault.close()
    with reopen(vault_path) as again:
        assert again.get(longer) == b"deep"
        assert max(len(m.path) for m in again.walk()) > 4600


def test_an_orphan_is_shredded_at_close_and_never_blocks_the_next_unlock(vault_path, vault):
    """A file unlinked while open when the vault closes (lock): gone with the
    close; and an orphan beside a new file of the same name opens fine."""
    vault.put("a.md", b"old secret")
    old = vault.record_id("a.md")
    vault.orphan_record(old)
    vault.put("a.md", b"new content")  # the same name, another record
    assert vault.get("a.md") == b"new content"
    vault.close()
    with reopen(vault_path, readonly=True) as again:
        assert [m.path for m in again.walk()] == ["a.md"]
        assert again.get("a.md") == b"new content"
        assert len(again._tree) == 1, "the orphan was shredded at close"
