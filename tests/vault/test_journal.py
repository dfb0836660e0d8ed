"""The journal: closed changes survive a killed writer without an fsync each."""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from memvault import errors
from memvault.vault import Vault, schema
from memvault.vault import journal as journal_module
from memvault.vault.journal import HEADER_SIZE, PREALLOCATED, journal_path

from .. import rawvault
from ..conftest import (
    FAST_KDF,
    PASSPHRASE,
    assert_nowhere,
    assert_one_line_error,
    forget_vaults_seen,
    reopen,
    run_cli,
)

WRITER = textwrap.dedent(
    """
    import os, sys
    from memvault.vault import Vault
    v = Vault.open(sys.argv[1], sys.argv[2].encode(), compact_delay=None, journal=True)
    for i in range(40):
        v.put(f"j/{i}.md", f"journaled {sys.argv[3]} {i}".encode() * 20)
    v.delete("j/0.md")
    v.rename("j/1.md", "j/renamed.md")
    v.catch_up()  # what a mount does once it has replied (vault/later.py)
    print("done", flush=True)
    os.kill(os.getpid(), 9)  # before the journal is moved into LMDB
    """
)


def run_until_killed(script: str, vault_path, *args: str) -> subprocess.CompletedProcess:
    """Run a writer script on the vault; it kills itself with SIGKILL."""
    done = subprocess.run(
        [sys.executable, "-c", script, str(vault_path), PASSPHRASE.decode(), *args],
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    return done


def killed_writer(vault_path, marker="m"):
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    assert run_until_killed(WRITER, vault_path, marker).stdout == b"done\n"
    assert journal_path(vault_path).stat().st_size > 0


def expected(i, marker="m"):
    return f"journaled {marker} {i}".encode() * 20


def test_killed_writer_loses_nothing_and_readers_see_it(vault_path):
    killed_writer(vault_path)
    with reopen(vault_path, readonly=True) as ro:  # replayed in memory only
        assert ro.get("j/39.md") == expected(39)
        assert not ro.exists("j/0.md") and ro.get("j/renamed.md") == expected(1)
    assert journal_path(vault_path).stat().st_size > 0
    with reopen(vault_path) as again:  # replayed into LMDB, journal emptied
        assert len(again) == 39
        assert again.get("j/2.md") == expected(2)
    assert not journal_path(vault_path).exists()
    with reopen(vault_path) as again:
        assert again.get("j/renamed.md") == expected(1)


def stored_states(vault_path) -> tuple[int, int]:
    """(sealed states, record values) the journal stores (read without the key)."""
    state_db, records_db = schema.DB_NAMES.index("state"), schema.DB_NAMES.index("records")
    ops = list(journal_module.scan_unauthenticated(journal_path(vault_path)))
    states = sum(op.db == state_db and op.key == schema.STATE_KEY for op in ops)
    return states, sum(op.db == records_db for op in ops)


def test_a_burst_of_commits_is_covered_by_one_state_and_a_killed_one_is_counted(vault_path):
    """A mount seals the vault state and the audit entry once per burst of commits;
    what a killed daemon journaled after its last state is authenticated by the
    journal's MAC, counted into the integrity sum and sealed at the next unlock,
    with the trail saying which memories changed then (not who changed them)."""
    killed_writer(vault_path)
    states, records = stored_states(vault_path)
    assert records >= 40 and states == 0  # 42 commits, no state yet: all in memory
    with reopen(vault_path) as again:  # no integrity failure: the tail is counted
        assert len(again) == 39 and again.get("j/39.md") == expected(39)
        replayed = [e for e in again.audit_trail() if e.op == "replay"]
        assert {e.path for e in replayed} >= {"j/39.md", "j/renamed.md"}
        assert None in {e.path for e in replayed}  # j/0.md: shredded, its path unreadable
    assert not journal_path(vault_path).exists()
    with reopen(vault_path) as again:  # sealed now: nothing replayed twice
        assert len([e for e in again.audit_trail() if e.op == "replay"]) == len(replayed)


FLUSHED_THEN_KILLED = textwrap.dedent(
    """
    import os, sys
    from memvault.vault import Vault
    v = Vault.open(sys.argv[1], sys.argv[2].encode(), compact_delay=None, journal=True)
    v.put("a.md", b"sealed and flushed")
    v.sync()  # as fsync() does: zeros ahead of the journal from now on
    v._writer._flush_soon()  # as the housekeeper does: this machine notes the generation
    v.put("b.md", b"journaled after the last state")
    os.kill(os.getpid(), 9)
    """
)


def test_zeros_are_kept_ahead_of_the_journal_while_fsyncs_come(vault_path, monkeypatch):
    """After an fsync, entries go into zeros written ahead of them (the next
    fsync commits no size change), and a flush overwrites them with zeros; a
    flush after a while without fsync cuts the journal back to its header. No
    byte of an entry stays either way, and a journal grown past
    PREALLOCATED_MAX shrinks back to it."""
    step = 1 << 20  # larger than 20 small files' entries
    monkeypatch.setattr(journal_module, "PREALLOCATED", step)
    monkeypatch.setattr(journal_module, "PREALLOCATED_MAX", 3 * step)
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    journal = journal_path(vault_path)

    def emptied() -> bool:
        return not any(journal.read_bytes()[HEADER_SIZE:])

    with reopen(vault_path, compact_delay=None, journal=True) as v:
        assert journal.stat().st_size == HEADER_SIZE
        v.put("unsynced.md", os.urandom(1500))  # no fsync: no zeros
        assert HEADER_SIZE < journal.stat().st_size < step
        v._writer._flush_soon()
        assert journal.stat().st_size == HEADER_SIZE
        for i in range(20):
            v.put(f"n{i}.md", os.urandom(1500))
            v.sync()  # as fsync() does
            assert journal.stat().st_size == step
        assert journal.stat().st_blocks * 512 >= step  # written, not a hole
        assert v._store.journaled_entries and not emptied()
        v._writer._flush_soon()
        assert not v._store.journaled_entries and emptied()
        assert journal.stat().st_size == step  # an fsync came: kept
        v.put("grown.bin", os.urandom(step))
        v.sync()  # zeros ahead to the next step
        assert journal.stat().st_size == 2 * step
        v._writer._flush_soon()
        assert journal.stat().st_size == 2 * step and emptied()
        v.put("big.bin", os.urandom(4 * step))  # past the most: no zeros first
        v.sync()
        assert journal.stat().st_size > 4 * step
        v._writer._flush_soon()
        assert journal.stat().st_size == 3 * step and emptied()
        v.put("quiet.md", os.urandom(1500))  # a while without fsync: cut back
        v._writer._flush_soon()
        assert journal.stat().st_size == HEADER_SIZE
        v.put("after.md", b"appended where a replay finds it")
    with reopen(vault_path) as again:
        assert again.get("after.md") == b"appended where a replay finds it"


def test_bytes_past_the_zeros_are_not_damage(vault_path):
    """A daemon killed while a flush overwrote the journal with zeros leaves bytes
    past them (entries LMDB holds already): the journal ends at the zeros, and
    what lies past them is cleared when it is replayed."""
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    run_until_killed(FLUSHED_THEN_KILLED, vault_path)
    journal = journal_path(vault_path)
    data = bytearray(journal.read_bytes())
    assert len(data) == PREALLOCATED
    data[-5000:] = os.urandom(5000)
    journal.write_bytes(bytes(data))
    with reopen(vault_path, readonly=True) as ro:  # the same boot: no power cut, no damage
        assert ro.get("b.md") == b"journaled after the last state"
    with reopen(vault_path, compact_delay=None, journal=True) as again:
        assert again.get("b.md") == b"journaled after the last state"
        assert not any(journal.read_bytes()[HEADER_SIZE:])


def test_changes_after_a_flush_make_the_vault_newer_not_a_fork(vault_path):
    """The machine noted generation G with the digest of G's state; the replayed
    changes after it make the vault newer than G, not another copy at G."""
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    run_until_killed(FLUSHED_THEN_KILLED, vault_path)
    with reopen(vault_path, readonly=True) as ro:
        assert ro.get("b.md") == b"journaled after the last state"
    with reopen(vault_path) as again:
        assert again.get("a.md") == b"sealed and flushed"
        assert again.get("b.md") == b"journaled after the last state"


def test_an_unreadable_version_under_a_replayed_change_is_damage(vault_path):
    """The integrity sum cannot count a replayed change whose earlier version fails
    authentication: the vault says so (repair decides), it does not open as if whole."""
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    with reopen(vault_path) as vault:
        vault.put("j/5.md", b"version one")
        rid = vault._tree.by_path["j/5.md"].record_id
    run_until_killed(WRITER, vault_path, "m")
    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        value = bytearray(txn.get(rid, db=dbs["records"]))
        value[12] ^= 1  # inside its sealed generation
        txn.put(rid, bytes(value), db=dbs["records"])
    with pytest.raises(errors.VaultDamaged):
        reopen(vault_path)


def test_a_flush_moves_only_what_a_sealed_state_covers(vault_path):
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    with reopen(vault_path, journal=True) as vault:
        vault.put("a.md", b"first")
        vault.put("b.md", b"second")
        vault._store.flush()
        assert vault._store.journaled_entries == 2  # LMDB never gets a change no state covers
        with pytest.raises(RuntimeError):  # nor does a state written straight into it
            vault._store.journal_writes(False)
        vault._writer._flush_soon()  # the housekeeper's: the state first, then the flush
        assert vault._store.journaled_entries == 0
        assert stored_states(vault_path) == (0, 0)  # the journal emptied


def test_every_journaled_write_reaches_lmdb_without_another_change(vault_path):
    """Derived data (the embedder's vectors) go through the journal like a change,
    and are moved into LMDB by the housekeeper, not left until the next edit."""
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    with reopen(vault_path, journal=True) as vault:
        vault.put("a.md", b"first")
        deadline = time.monotonic() + 10
        while vault.housekeeping and time.monotonic() < deadline:
            time.sleep(0.05)
        assert vault.journaled_changes == 0, "the put was never moved"
        record = vault.record_id("a.md")
        assert vault.put_derived(record, vault.stat("a.md").body_gen, b"vectors")
        assert vault.journaled_changes == 1 and vault.housekeeping == ["flush"]
        while vault.housekeeping and time.monotonic() < deadline + 10:
            time.sleep(0.05)
        assert vault.journaled_changes == 0, "the vectors stayed in the journal"


def test_a_replay_does_not_launder_an_older_copy_of_a_record(vault_path):
    """A record rolled back in LMDB under a killed daemon's unsealed change is still
    found: the change is counted against the generation the state holds."""
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    with reopen(vault_path) as vault:
        vault.put("j/5.md", b"version one")
    old = dict(rawvault.raw_items(vault_path, "records"))
    with reopen(vault_path) as vault:
        vault.put("j/5.md", b"version two")
    run_until_killed(WRITER, vault_path, "m")
    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        for key, value in old.items():
            txn.put(key, value, db=dbs["records"])  # version one again, under the journal
    with pytest.raises(errors.VaultTampered):
        reopen(vault_path)


def test_journal_holds_no_plaintext(vault_path):
    marker = "JOURNALMARKER0x5eed"
    killed_writer(vault_path, marker)
    assert_nowhere([marker.encode(), b"renamed.md", b"j/39.md"], vault_path.parent)


def test_journal_cut_at_an_entry_boundary_is_refused(vault_path):
    killed_writer(vault_path)
    journal = journal_path(vault_path)
    data = journal.read_bytes()
    ends = rawvault.journal_entry_ends(data)
    journal.write_bytes(data[: ends[-2]])  # the last change (the rename) cut off
    with pytest.raises(errors.JournalDamaged, match="shortened"):
        reopen(vault_path, readonly=True)
    line = assert_one_line_error(run_cli("get", "j/5.md", vault=vault_path))
    assert "--accept-journal-loss" in line
    with reopen(vault_path, readonly=True, accept_journal_loss=True) as ro:
        assert ro.get("j/1.md") == expected(1) and not ro.exists("j/renamed.md")
    got = run_cli("get", "j/5.md", "--accept-journal-loss", vault=vault_path)
    assert got.returncode == 0 and got.stdout == expected(5)


def test_journal_with_a_flipped_last_entry_is_refused(vault_path):
    killed_writer(vault_path)
    journal = journal_path(vault_path)
    data = bytearray(journal.read_bytes())
    data[rawvault.journal_entry_ends(bytes(data))[-2] + 20] ^= 1
    journal.write_bytes(bytes(data))
    with pytest.raises(errors.JournalDamaged, match="last entry"):
        reopen(vault_path)


def test_deleted_journal_is_refused(vault_path):
    killed_writer(vault_path)
    journal_path(vault_path).unlink()
    with pytest.raises(errors.JournalDamaged, match="missing"):
        reopen(vault_path)
    with reopen(vault_path, accept_journal_loss=True) as again:  # knowingly, without it
        assert not again.exists("j/0.md")
    with reopen(vault_path) as again:  # and from then on it is a clean vault
        assert len(again) == 0


def test_forged_entry_in_the_middle_is_refused(vault_path):
    killed_writer(vault_path)
    journal = journal_path(vault_path)
    forged = bytearray(journal.read_bytes())
    forged[HEADER_SIZE + 40] ^= 1  # inside the first entry
    journal.write_bytes(bytes(forged))
    with pytest.raises(errors.VaultTampered):
        reopen(vault_path)


def test_torn_tail_after_a_restart_is_dropped(vault_path, tmp_path, monkeypatch):
    killed_writer(vault_path)
    journal = journal_path(vault_path)
    data = journal.read_bytes()
    journal.write_bytes(
        data[: rawvault.journal_entry_ends(data)[-1] - 7]
    )  # a power cut in the last entry
    with pytest.raises(errors.JournalDamaged):  # same boot: that is no power cut
        reopen(vault_path, readonly=True)
    other_boot = tmp_path / "boot_id"
    other_boot.write_text(str(uuid.uuid4()))
    monkeypatch.setattr(journal_module, "BOOT_ID_PATH", str(other_boot))
    with reopen(vault_path) as again:
        assert again.get("j/38.md") == expected(38)
        assert again.exists("j/1.md") and not again.exists("j/renamed.md")


def test_journal_position_is_sealed_not_clear(vault_path):
    killed_writer(vault_path)
    with reopen(vault_path):
        pass
    with rawvault.raw(vault_path) as (txn, dbs):
        clear = {bytes(k) for k, _ in txn.cursor(dbs["state"])}
    assert clear <= {b"accumulator", b"snapshot", b"settled", b"root", b"embedding-model"}
    rawvault.flip_in_file(vault_path, _state_value(vault_path), 30)
    with pytest.raises(errors.VaultCorrupted, match="state"):
        reopen(vault_path)


def _state_value(vault_path) -> bytes:
    with rawvault.raw(vault_path) as (txn, dbs):
        return bytes(txn.get(b"accumulator", db=dbs["state"]))


def test_journaled_vault_flushes_and_shreds(vault_path):
    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None):
        pass
    with reopen(vault_path, journal=True) as v:
        v.put("a.md", b"A" * 500)
        v._store.flush()
        rid = v.record_id("a.md")
        with v._store.read() as txn:
            value = bytes(txn.get(rid, db="records"))
        v.put("b.md", b"B" * 500)
        assert journal_path(vault_path).stat().st_size > 0
        v.delete("a.md")
    assert not journal_path(vault_path).exists()
    data = vault_path.read_bytes()
    for i in range(len(value) - 16):
        assert value[i : i + 16] not in data
    with reopen(vault_path) as again:
        assert again.get("b.md") == b"B" * 500 and not again.exists("a.md")


def test_a_refused_unlock_keeps_the_journal(vault_path):
    """A writable open refused after replaying (a damaged record) must not delete the
    journal while the sealed state still says a session is open."""
    killed_writer(vault_path)
    with reopen(vault_path, readonly=True) as ro:
        rid = ro.record_id("j/7.md")
    with reopen(vault_path) as v:
        value = rawvault.record_for(vault_path, v, "j/7.md")[1]
        v.put("j/8.md", b"after the replay")  # a session that changed something...
    killed_writer_again = textwrap.dedent(
        """
        import os, sys
        from memvault.vault import Vault
        v = Vault.open(sys.argv[1], sys.argv[2].encode(), compact_delay=None, journal=True)
        v.put("late.md", b"journaled late")
        os.kill(os.getpid(), 9)
        """
    )
    run_until_killed(killed_writer_again, vault_path)
    meta, _ = rawvault.split(value)
    rawvault.flip_in_file(vault_path, meta[30:62], 3)
    with pytest.raises(errors.VaultDamaged):
        reopen(vault_path, journal=True)
    assert journal_path(vault_path).exists()
    with reopen(vault_path, readonly=True) as ro:  # no false "journal is missing"
        assert ro.get("late.md") == b"journaled late" and rid in ro.damaged


BIG_WRITER = textwrap.dedent(
    """
    import os, sys
    from memvault.vault import Vault
    v = Vault.open(sys.argv[1], sys.argv[2].encode(), compact_delay=None, journal=True)
    v.put("big.bin", bytes.fromhex(sys.argv[3]) * 20000)  # 320 KB: five sealed chunks
    print("done", flush=True)
    os.kill(os.getpid(), 9)
    """
)


def _killed_big_writer(vault_path) -> bytes:
    pattern = os.urandom(16)
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    assert run_until_killed(BIG_WRITER, vault_path, pattern.hex()).stdout == b"done\n"
    return pattern * 20000


def _large_values(data: bytes) -> list[tuple[int, int]]:
    """(offset, length) of every journaled value of 64 KiB or more."""
    found, at = [], HEADER_SIZE
    while at < len(data) and any(data[at : at + 12]):
        length = int.from_bytes(data[at : at + 4], "big")
        op, end = at + 12, at + 12 + length
        while op < end:
            key_len = int.from_bytes(data[op + 2 : op + 4], "big")
            value_len = int.from_bytes(data[op + 4 : op + 8], "big")
            value_at = op + 8 + key_len
            if value_len >= 64 << 10:
                found.append((value_at, value_len))
            op = value_at + value_len
        at = end + 32
    return found


def test_a_large_journaled_value_is_authenticated_by_its_own_seal(vault_path):
    """Entry MACs cover a large value by its length, tag and a CRC-32 of 8 bytes of
    every 256: a disk sector a power cut left unwritten, or a flip in the sample,
    is refused at unlock; a flip outside it passes the journal but fails the
    value's own authentication when read."""
    _killed_big_writer(vault_path)
    journal = journal_path(vault_path)
    data = journal.read_bytes()
    offset, _ = _large_values(data)[0]
    sector = -(-(offset + 1000) // 512) * 512  # the first whole file sector past 1,000 bytes in
    in_sample = offset + 256 * 3 + 250  # the 8 sampled bytes are the last of every 256
    damages = {
        "a sector of zeros": (sector, bytes(512)),
        "a sector of older bytes": (sector, os.urandom(512)),
        "a flip in the sample": (in_sample, bytes([data[in_sample] ^ 1])),
    }
    for name, (at, replacement) in damages.items():
        damaged = bytearray(data)
        damaged[at : at + len(replacement)] = replacement
        journal.write_bytes(bytes(damaged))
        with pytest.raises(errors.VaultTampered):
            reopen(vault_path, readonly=True).close()
            pytest.fail(f"{name} was not refused")

    forged = bytearray(data)
    forged[offset + 1000] ^= 1  # outside the sample
    journal.write_bytes(bytes(forged))
    with reopen(vault_path, readonly=True) as ro, pytest.raises(errors.MemoryCorrupted):
        ro.get("big.bin")


@pytest.mark.parametrize(
    "magic, summarised",
    [
        (journal_module._FULL_MAC_MAGIC, lambda parts: parts),
        (
            journal_module._WHOLE_CRC_MAGIC,
            functools.partial(journal_module._summarised, sampled=False),
        ),
    ],
    ids=["whole values", "whole CRC"],
)
def test_a_journal_in_a_previous_format_is_replayed(
    vault_path, tmp_path, monkeypatch, magic, summarised
):
    """A journal a killed daemon of a previous version left: MACs over whole values,
    or summaries with a CRC-32 of the whole chunk."""
    monkeypatch.setattr(journal_module, "_MAGIC", magic)
    monkeypatch.setattr(journal_module, "_summarised", summarised)
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    content = os.urandom(300_000)
    crashed = tmp_path / "crashed" / "memory.vault"
    crashed.parent.mkdir()
    with reopen(vault_path, journal=True) as v:
        v.put("big.bin", content)
        assert journal_path(vault_path).read_bytes()[:4] == magic
        shutil.copy(vault_path, crashed)  # the files as a killed daemon leaves them
        shutil.copy(journal_path(vault_path), journal_path(crashed))
    forget_vaults_seen()  # the copies are older than the vault they came from, which went on
    monkeypatch.undo()
    assert journal_path(crashed).stat().st_size > HEADER_SIZE
    torn = tmp_path / "torn" / "memory.vault"  # the same, its header torn by a power cut
    torn.parent.mkdir()
    shutil.copy(crashed, torn)
    header_torn = bytearray(journal_path(crashed).read_bytes())
    header_torn[10] ^= 1
    journal_path(torn).write_bytes(bytes(header_torn))
    with reopen(crashed) as again:
        assert again.get("big.bin") == content
    other_boot = tmp_path / "boot_id"
    other_boot.write_text(str(uuid.uuid4()))
    monkeypatch.setattr(journal_module, "BOOT_ID_PATH", str(other_boot))
    forget_vaults_seen()  # torn is the same vault as crashed, with fewer entries: older
    with reopen(torn) as again:  # after a restart: every entry that verifies is kept
        assert again.get("big.bin") == content


def test_fsync_makes_the_journal_durable_without_moving_it_into_lmdb(
    vault_path, tmp_path, monkeypatch
):
    """fsync() costs one fdatasync of the journal: after a power cut right then
    (the files as they are on disk), a restart replays what it promised."""
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    vault = reopen(vault_path, compact_delay=None, journal=True)
    cut = tmp_path / "cut" / vault_path.name
    cut.parent.mkdir()
    try:
        vault.put("synced.md", b"kept through a power cut")
        lmdb_size = vault_path.stat().st_size
        vault.sync()
        assert vault._store.journaled_entries, "fsync flushed the journal into LMDB"
        assert vault_path.stat().st_size == lmdb_size
        shutil.copy(vault_path, cut)
        shutil.copy(journal_path(vault_path), journal_path(cut))
    finally:
        vault.close()
    forget_vaults_seen()  # the copy is older than the vault it came from, which went on
    other_boot = tmp_path / "boot_id"
    other_boot.write_text(str(uuid.uuid4()))
    monkeypatch.setattr(journal_module, "BOOT_ID_PATH", str(other_boot))
    with reopen(cut) as again:
        assert again.get("synced.md") == b"kept through a power cut"


LEFT_FOR_LATER = textwrap.dedent(
    """
    import os, sys
    from memvault.vault import Vault
    from memvault.vault.records import FILE
    v = Vault.open(sys.argv[1], sys.argv[2].encode(), compact_delay=None, journal=True)
    v.put("first.md", b"drops the snapshot stored at the last lock: the short paths follow")
    rid, _ = v.create_in(None, "late.md", FILE, mode=0o600, opened=True)
    v.write_chunks(rid, {0: b"written, then the daemon was killed"}, 35)
    if sys.argv[3] == "caught-up":
        v.catch_up()  # what the mount does once it has replied
    print(len(v._lock.later), flush=True)
    os.kill(os.getpid(), 9)
    """
)


def test_a_write_whose_header_was_left_for_later_survives_a_kill(vault_path):
    """The mount replies to a write() before the journal's header names its entry
    (vault/later.py); killed in between, the entry is replayed all the same."""
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    done = run_until_killed(LEFT_FOR_LATER, vault_path, "killed-before")
    assert int(done.stdout) > 0, "the bookkeeping was still left for later"
    header_seq, entries = rawvault.journal_seqs(journal_path(vault_path).read_bytes())
    assert entries and header_seq == entries[-1] - 1  # the header one entry behind
    with reopen(vault_path, verify_every_record=True) as again:  # the integrity sum holds
        assert again.get("late.md") == b"written, then the daemon was killed"
        assert [e.op for e in again.audit_trail() if e.path == "late.md"] == ["replay"]


def test_a_cut_after_the_header_left_for_later_was_written_is_refused(vault_path):
    Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()
    assert run_until_killed(LEFT_FOR_LATER, vault_path, "caught-up").stdout == b"0\n"
    journal = journal_path(vault_path)
    data = journal.read_bytes()
    header_seq, entries = rawvault.journal_seqs(data)
    assert header_seq == entries[-1]
    journal.write_bytes(data[: rawvault.journal_entry_ends(data)[-2]])
    with pytest.raises(errors.JournalDamaged, match="shortened"):
        reopen(vault_path, readonly=True)
