"""Security invariants, checked on the raw bytes of real vault files."""

from __future__ import annotations

import os

import pytest

from memvault import errors
from memvault.vault import Vault

from .. import rawvault
from ..conftest import (
    FAST_KDF,
    KDF_ARGS,
    PASSPHRASE,
    assert_nowhere,
    assert_one_line_error,
    reopen,
    run_cli,
)

MARKER = b"MARKER-7f3a9c1e-deploys-go-through-make-release"
DIR_NAME = "zebrafish-project-4471"
FILE_NAME = "quetzal-notes-9913.md"


def windows(data: bytes, size: int = 16):
    return (data[i : i + size] for i in range(0, len(data) - size + 1))


def assert_no_window_in(file_bytes: bytes, secret: bytes) -> None:
    for window in windows(secret):
        assert window not in file_bytes, f"{window.hex()} survived in the vault file"


def test_no_plaintext_content_path_or_name_in_any_file(tmp_path):
    vault_path = tmp_path / "v" / "memory.vault"
    assert (
        run_cli(
            "init", "--passphrase-stdin", *KDF_ARGS, vault=vault_path, input=PASSPHRASE + b"\n"
        ).returncode
        == 0
    )
    mem = f"{DIR_NAME}/{FILE_NAME}"
    body = b"# Notes\n" + MARKER + b"\n" + b"filler line of text\n" * 200
    assert run_cli("put", mem, vault=vault_path, input=body).returncode == 0
    assert run_cli("put", "small.md", vault=vault_path, input=MARKER[::-1]).returncode == 0
    assert run_cli("get", mem, vault=vault_path).stdout == body
    assert DIR_NAME in run_cli("ls", vault=vault_path).stdout.decode()
    assert run_cli("mv", mem, f"{DIR_NAME}/renamed-{FILE_NAME}", vault=vault_path).returncode == 0
    needles = [MARKER, MARKER[::-1], DIR_NAME.encode(), FILE_NAME.encode(), mem.encode()]
    assert_nowhere(needles, vault_path.parent)


def test_wrong_passphrase_fails_cleanly_and_changes_nothing(vault_path, vault):
    vault.put("a.md", b"a")
    vault.close()
    before = vault_path.read_bytes()
    result = run_cli("get", "a.md", vault=vault_path, passphrase=b"wrong one")
    line = assert_one_line_error(result)
    assert "Wrong passphrase" in line
    assert vault_path.read_bytes() == before


@pytest.mark.parametrize("where", ["nonce", "middle", "tag"])
def test_flipped_byte_in_body_names_the_memory_and_spares_others(vault_path, vault, where):
    vault.put("keep/one.md", b"first memory " * 20)
    vault.put("hit/target.md", b"the memory that gets damaged " * 20)
    vault.put("keep/two.md", b"second memory " * 20)
    _, value, _ = rawvault.record_for(vault_path, vault, "hit/target.md")
    vault.close()
    _, body = rawvault.split(value)
    offset = {"nonce": 3, "middle": len(body) // 2, "tag": len(body) - 2}[where]
    rawvault.flip_in_file(vault_path, body, offset)

    with reopen(vault_path) as again:
        with pytest.raises(errors.MemoryCorrupted) as caught:
            again.get("hit/target.md")
        assert "hit/target.md" in str(caught.value)
        assert again.get("keep/one.md") == b"first memory " * 20
        assert again.get("keep/two.md") == b"second memory " * 20
    line = assert_one_line_error(run_cli("get", "hit/target.md", vault=vault_path))
    assert "hit/target.md" in line and "integrity" in line


@pytest.fixture(params=["snapshot", "full-check"])
def unlock_mode(request):
    """Unlock through the sealed index snapshot, or with it removed (every record checked)."""
    return request.param


def prepare(vault_path, unlock_mode):
    if unlock_mode == "full-check":
        rawvault.drop_snapshot(vault_path)


def test_flipped_byte_in_metadata_is_harmless_or_marks_record_damaged(
    vault_path, vault, unlock_mode
):
    vault.put("ok.md", b"fine")
    vault.put("bad.md", b"will lose its metadata")
    rid, value, _ = rawvault.record_for(vault_path, vault, "bad.md")
    vault.close()
    meta, _ = rawvault.split(value)
    rawvault.flip_in_file(vault_path, meta, len(meta) // 2)
    prepare(vault_path, unlock_mode)
    with reopen(vault_path, readonly=True) as again:
        assert again.get("ok.md") == b"fine"
        if unlock_mode == "snapshot":  # the snapshot holds the metadata: right answer
            assert again.get("bad.md") == b"will lose its metadata"
        else:
            assert rid in again.damaged
            assert not again.exists("bad.md")
    if unlock_mode == "full-check":
        result = run_cli("get", "ok.md", vault=vault_path)
        assert result.returncode == 0 and result.stdout == b"fine"
        assert "damaged" in result.stderr.decode()


def test_swapped_bodies_are_detected(vault_path, vault):
    vault.put("a.md", b"content of a")
    vault.put("b.md", b"content of b")
    rid_a, val_a, _ = rawvault.record_for(vault_path, vault, "a.md")
    rid_b, val_b, _ = rawvault.record_for(vault_path, vault, "b.md")
    vault.close()
    (meta_a, body_a), (meta_b, body_b) = rawvault.split(val_a), rawvault.split(val_b)

    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        txn.put(rid_a, rawvault.repack(val_a, meta_a, body_b), db=dbs["records"])
        txn.put(rid_b, rawvault.repack(val_b, meta_b, body_a), db=dbs["records"])
    with reopen(vault_path) as again:
        for name in ("a.md", "b.md"):
            with pytest.raises(errors.MemoryCorrupted):
                again.get(name)


def test_swapped_whole_records_are_detected(vault_path, vault, unlock_mode):
    vault.put("a.md", b"content of a")
    vault.put("b.md", b"content of b")
    rid_a, val_a, _ = rawvault.record_for(vault_path, vault, "a.md")
    rid_b, val_b, _ = rawvault.record_for(vault_path, vault, "b.md")
    vault.close()
    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        txn.put(rid_a, val_b, db=dbs["records"])
        txn.put(rid_b, val_a, db=dbs["records"])
    prepare(vault_path, unlock_mode)
    with pytest.raises(errors.VaultDamaged, match="a.md"):
        reopen(vault_path)
    with reopen(vault_path, readonly=True) as again:
        assert set(again.damaged) == {rid_a, rid_b}
        assert not again.exists("a.md") and not again.exists("b.md")
    with reopen(vault_path, repair=True) as again:  # each is bound to its own id: put back
        assert sorted(again.repair()) == ["recovered a.md", "recovered b.md"]
    with reopen(vault_path) as again:
        assert again.get("a.md") == b"content of a" and again.get("b.md") == b"content of b"


def test_replayed_old_record_is_detected(vault_path, vault, unlock_mode):
    vault.put("r.md", b"version one")
    vault.put("other.md", b"x")
    rid, old_value, _ = rawvault.record_for(vault_path, vault, "r.md")
    vault.put("r.md", b"version two")
    vault.close()
    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        txn.put(rid, old_value, db=dbs["records"])
    prepare(vault_path, unlock_mode)
    with pytest.raises(errors.VaultTampered):
        reopen(vault_path)
    line = assert_one_line_error(run_cli("get", "other.md", vault=vault_path))
    assert "integrity check" in line


def test_replayed_old_body_is_detected(vault_path, vault):
    vault.put("r.md", b"version one")
    rid, old_value, _ = rawvault.record_for(vault_path, vault, "r.md")
    vault.put("r.md", b"version two")
    _, new_value, _ = rawvault.record_for(vault_path, vault, "r.md")
    vault.close()

    new_meta, _ = rawvault.split(new_value)
    _, old_body = rawvault.split(old_value)
    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        txn.put(rid, rawvault.repack(new_value, new_meta, old_body), db=dbs["records"])
    with reopen(vault_path) as again, pytest.raises(errors.MemoryCorrupted):
        again.get("r.md")


def test_removed_record_is_detected(vault_path, vault, unlock_mode):
    vault.put("a.md", b"a")
    vault.put("b.md", b"b")
    rid, _, _ = rawvault.record_for(vault_path, vault, "a.md")
    vault.close()
    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        txn.delete(rid, db=dbs["records"])
        txn.delete(rid, db=dbs["keys"])
    prepare(vault_path, unlock_mode)
    with pytest.raises(errors.VaultTampered):
        reopen(vault_path)


def _capture(vault_path, vault, name):
    rid, value, wrapped = rawvault.record_for(vault_path, vault, name)
    file_bytes = vault_path.read_bytes()
    # Sanity: before the shred the bytes are there, so the scan can see them.
    assert value[8:40] in file_bytes and wrapped[:32] in file_bytes
    return value, wrapped


def test_shred_via_cli_leaves_no_byte_behind(vault_path, vault):
    for i in range(30):
        vault.put(f"n/{i}.md", f"note {i} ".encode() * 100)
    vault.put("secret/token.md", b"sk-live-THIS-IS-THE-SECRET " * 40)
    value, wrapped = _capture(vault_path, vault, "secret/token.md")
    vault.close()
    assert run_cli("rm", "secret/token.md", vault=vault_path).returncode == 0
    result = run_cli("get", "secret/token.md", vault=vault_path)
    assert "No memory at" in assert_one_line_error(result)
    assert "token.md" not in run_cli("ls", "-R", vault=vault_path).stdout.decode()
    file_bytes = vault_path.read_bytes()
    assert_no_window_in(file_bytes, value)
    assert_no_window_in(file_bytes, wrapped)
    with reopen(vault_path) as again:
        assert again.get("n/29.md") == b"note 29 " * 100


def test_shred_then_debounced_compaction_without_close(vault_path):
    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=0.2) as v:
        for i in range(20):
            v.put(f"n/{i}.md", f"note {i} ".encode() * 60)
        value, wrapped = _capture(vault_path, v, "n/7.md")
        v.delete("n/7.md")
        assert not v.exists("n/7.md")
        with pytest.raises(errors.MemoryNotFound):
            v.get("n/7.md")
        import time

        deadline = time.monotonic() + 10
        while v.pending_shreds and time.monotonic() < deadline:
            time.sleep(0.05)
        assert v.pending_shreds == 0
        file_bytes = vault_path.read_bytes()
        assert_no_window_in(file_bytes, value)
        assert_no_window_in(file_bytes, wrapped)
        assert v.get("n/8.md") == b"note 8 " * 60  # still usable after the swap


def test_shredded_directory_tree_leaves_no_byte_behind(vault_path, vault):
    vault.put("keep.md", b"k" * 500)
    captured = []
    for i in range(5):
        vault.put(f"tree/sub{i}/f.md", f"secret {i} ".encode() * 80)
        captured.append(_capture(vault_path, vault, f"tree/sub{i}/f.md"))
    vault.delete("tree", recursive=True)
    vault.close()
    file_bytes = vault_path.read_bytes()
    for value, wrapped in captured:
        assert_no_window_in(file_bytes, value)
        assert_no_window_in(file_bytes, wrapped)


def _edit_slot(vault_path, change, fix_checksum=True):
    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        stored = bytes(txn.get(bytes([0]), db=dbs["slots"]))
        txn.put(bytes([0]), rawvault.edit_json(stored, change, fix_checksum), db=dbs["slots"])


def _edit_header(vault_path, change, fix_checksum=True):
    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        stored = bytes(txn.get(b"header", db=dbs["meta"]))
        txn.put(b"header", rawvault.edit_json(stored, change, fix_checksum), db=dbs["meta"])


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d["params"].update(m=16 * 1024),
        lambda d: d["params"].update(t=2),
        lambda d: d["params"].update(p=2),
    ],
)
def test_tampered_kdf_parameters_are_detected(vault_path, vault, change):
    vault.close()
    _edit_slot(vault_path, change)
    with pytest.raises(errors.WrongPassphrase):
        reopen(vault_path)
    assert_one_line_error(run_cli("ls", vault=vault_path))


def test_damaged_keyslot_is_reported_as_damage(vault_path, vault):
    vault.close()
    _edit_slot(vault_path, lambda d: d["params"].update(t=2), fix_checksum=False)
    with pytest.raises(errors.VaultCorrupted, match="keyslot 0 is damaged"):
        reopen(vault_path)


def test_an_unknown_format_version_is_refused(vault_path, vault):
    vault.close()
    _edit_header(vault_path, lambda d: d.update(version=4))
    with pytest.raises(errors.UnsupportedFormat):
        reopen(vault_path)
    line = assert_one_line_error(run_cli("status", vault=vault_path))
    assert "format version 4" in line and "reads versions 2 and 3" in line


def test_a_format_version_changed_to_another_readable_one_is_detected(vault_path, vault):
    """Format 2 reads chunks of 64 KiB: a vault of format 3 shown as 2 must not open."""
    vault.put("big.bin", os.urandom(5 << 20))
    vault.close()
    _edit_header(vault_path, lambda d: d.update(version=2))
    with pytest.raises(errors.VaultTampered, match="header says format 2, its keys are format 3"):
        reopen(vault_path)


def test_tampered_header_is_detected(vault_path, vault):
    vault.close()
    _edit_header(vault_path, lambda d: d.update(created_ns=d["created_ns"] - 10**12))
    with pytest.raises(errors.VaultTampered):
        reopen(vault_path)


def test_damaged_header_is_reported(vault_path, vault):
    vault.close()
    _edit_header(vault_path, lambda d: d.update(created_ns=1), fix_checksum=False)
    with pytest.raises(errors.VaultCorrupted, match="header"):
        reopen(vault_path)


def test_damaged_directory_keeps_its_children_readable(vault_path, vault, unlock_mode):
    vault.put("proj/sub/a.md", b"child a")
    vault.put("proj/b.md", b"child b")
    vault.close()  # the directory's times are stored at close: read its record after
    with reopen(vault_path, readonly=True) as stored:
        _, value, _ = rawvault.record_for(vault_path, stored, "proj")
    meta, _ = rawvault.split(value)
    rawvault.flip_in_file(vault_path, meta, 30)
    prepare(vault_path, unlock_mode)
    with reopen(vault_path, readonly=True) as again:
        assert len(again.damaged) == (1 if unlock_mode == "full-check" else 0)
        assert again.get("proj/sub/a.md") == b"child a"
    if unlock_mode == "full-check":
        with pytest.raises(errors.VaultDamaged):
            reopen(vault_path)
        with reopen(vault_path, repair=True) as again:
            assert any("recreated the directory proj" in line for line in again.repair())
    with reopen(vault_path) as again:  # writable: the directory is recreated
        assert again.get("proj/b.md") == b"child b"
        assert again.stat("proj").is_dir
        again.put("proj/c.md", b"new")


def test_damaging_one_record_does_not_hide_a_replayed_other(vault_path, vault, unlock_mode):
    vault.put("victim.md", b"old secret")
    vault.put("decoy.md", b"decoy")
    rid, old_value, _ = rawvault.record_for(vault_path, vault, "victim.md")
    vault.put("victim.md", b"new secret")
    _, decoy_value, _ = rawvault.record_for(vault_path, vault, "decoy.md")
    current = rawvault.record_for(vault_path, vault, "victim.md")[1]
    vault.close()
    decoy_meta, _ = rawvault.split(decoy_value)
    rawvault.flip_in_file(vault_path, decoy_meta, 40)
    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        txn.put(rid, old_value, db=dbs["records"])
    prepare(vault_path, unlock_mode)
    with pytest.raises(errors.VaultTampered):
        reopen(vault_path)
    # Claiming the current generation for the old ciphertext does not help.
    old_meta, old_body = rawvault.split(old_value)
    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        txn.put(rid, rawvault.repack(current, old_meta, old_body), db=dbs["records"])
    try:
        again = reopen(vault_path, readonly=True)
    except errors.VaultTampered:
        return  # the old metadata's generation does not add up
    with again:  # listed by the snapshot: its old body fails
        assert unlock_mode == "snapshot"
        with pytest.raises(errors.MemoryCorrupted):
            again.get("victim.md")
