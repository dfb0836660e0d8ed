"""A vault of format 2 (64 KiB chunks), made by memvault before format 3
(commit f22f931's Vault.create, FAST_KDF, the suite's passphrase), opens and
changes in place: its files keep their 64 KiB chunks, new large files get
them too, and the header still says format 2."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from memvault.vault.bodies import CHUNK_SIZE
from memvault.vault.header import Header

from .. import rawvault
from ..conftest import reopen, run_cli

FIXTURE = Path(__file__).resolve().parent.parent / "data" / "format2.vault"
OLD_CHUNK = 64 << 10
SMALL = b"# a small note\n" * 10
BIG = random.Random(2).randbytes(300 * 1024 + 17)  # what the fixture's big.bin holds


@pytest.fixture
def old_vault(tmp_path) -> Path:
    path = tmp_path / "old.vault"
    shutil.copyfile(FIXTURE, path)
    return path


def chunk_count(path: Path) -> int:
    with rawvault.raw(path) as (txn, dbs):
        return sum(1 for _ in txn.cursor(dbs["chunks"]))


def header_version(path: Path) -> int:
    with rawvault.raw(path) as (txn, dbs):
        return Header.decode(bytes(txn.get(b"header", db=dbs["meta"]))).version


def test_a_format_2_vault_reads_as_it_was_written(old_vault):
    assert chunk_count(old_vault) == 5  # 300 KiB in 64 KiB chunks: a new vault keeps it inline
    with reopen(old_vault, readonly=True) as vault:
        assert vault.chunk_size == OLD_CHUNK != CHUNK_SIZE
        assert vault.get("notes/small.md") == SMALL
        assert vault.get("big.bin") == BIG
        rid = vault.record_id("big.bin")
        assert vault.read_chunk(rid, 2) == BIG[2 * OLD_CHUNK : 3 * OLD_CHUNK]
        assert vault.read_span(rid, 1, 4) == BIG[OLD_CHUNK:]


def test_a_format_2_vault_is_changed_in_its_own_chunks(old_vault):
    expected = bytearray(BIG)
    with reopen(old_vault) as vault:
        rid = vault.record_id("big.bin")
        patch = b"z" * OLD_CHUNK
        vault.write_chunks(rid, {1: patch}, len(expected))  # one chunk of the five
        expected[OLD_CHUNK : 2 * OLD_CHUNK] = patch
        vault.resize_record(rid, 3 * OLD_CHUNK + 5)
        del expected[3 * OLD_CHUNK + 5 :]
        vault.put("new.bin", b"n" * (2 * OLD_CHUNK + 1))  # large in format 2: chunked
    assert chunk_count(old_vault) == 4 + 3
    assert header_version(old_vault) == 2
    with reopen(old_vault, readonly=True) as vault:
        assert vault.get("big.bin") == expected
        assert vault.get("new.bin") == b"n" * (2 * OLD_CHUNK + 1)
        assert vault.get("notes/small.md") == SMALL


def test_status_says_which_format_a_vault_has(old_vault):
    out = run_cli("status", vault=old_vault, passphrase=None)
    assert out.returncode == 0, out.stderr
    assert b"memvault format 2" in out.stdout
