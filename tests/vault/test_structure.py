"""The structure check before LMDB maps a file: all of it, or only the
databases a reader needs (`status` reads the header and keyslots)."""

from __future__ import annotations

import os

import pytest

from memvault.errors import VaultCorrupted
from memvault.vault import Vault
from memvault.vault.bodies import CHUNK_SIZE
from memvault.vault.loading import read_info
from memvault.vault.schema import META, SLOTS
from memvault.vault.structure import check_structure

from ..conftest import FAST_KDF, PASSPHRASE

PAGE = 4096


@pytest.fixture
def chunks_page_broken(vault_path):
    """A vault whose chunks database has a broken leaf page, all else intact."""
    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as v:
        v.put("note.md", b"a small memory")
        v.put("big.bin", os.urandom(40 * CHUNK_SIZE))
        keys = v._bodies.chunk_keys_of(v._tree.by_path["big.bin"])
    raw = bytearray(vault_path.read_bytes())
    page = raw.index(keys[0]) // PAGE  # the leaf page that holds the chunk keys
    raw[page * PAGE : page * PAGE + 16] = bytes([0xFF]) * 16  # its header: page number, flags
    vault_path.write_bytes(raw)
    return vault_path


def test_a_partial_check_walks_only_the_databases_named(chunks_page_broken):
    with pytest.raises(VaultCorrupted):
        check_structure(chunks_page_broken)
    check_structure(chunks_page_broken, databases=(META, SLOTS))


def test_status_reads_the_header_without_walking_every_page(chunks_page_broken, caplog):
    """Walked whole, the file's damage elsewhere would be read around (a salvage
    copy of everything reachable) just to show the header."""
    caplog.set_level("WARNING", logger="memvault")
    info = read_info(chunks_page_broken)
    assert info.header.version >= 2 and len(info.slots) == 1
    assert "reading around it" not in caplog.text
