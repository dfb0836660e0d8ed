"""The crypto package on its own: AEAD, associated data, KDF, keyslots."""

from __future__ import annotations

import os

import pytest
from nacl.bindings import crypto_aead_xchacha20poly1305_ietf_encrypt

from memvault.crypto import (
    DEFAULT_KDF,
    OVERHEAD,
    DecryptionError,
    KdfParams,
    Keyslot,
    Kind,
    SlotChecksumError,
    associated_data,
    derive_key,
    new_key,
    open_sealed,
    seal,
    wipe,
)
from memvault.crypto.aead import LARGE_MESSAGE

from ..conftest import FAST_KDF

VAULT_ID = bytes(range(16))


def ad(kind=Kind.BODY, object_id=b"r" * 16, generation=1, version=1, vault_id=VAULT_ID):
    return associated_data(version, vault_id, kind, object_id, generation)


def test_seal_roundtrip_and_fresh_nonces():
    key = new_key()
    a = seal(key, b"hello", ad())
    b = seal(key, b"hello", ad())
    assert a != b, "every encryption must use a fresh random nonce"
    assert len(a) == len(b"hello") + OVERHEAD
    assert bytes(open_sealed(key, a, ad())) == b"hello"
    assert bytes(open_sealed(key, seal(key, b"", ad()), ad())) == b""


@pytest.mark.parametrize("size", [100, LARGE_MESSAGE - 1, LARGE_MESSAGE, 64 << 10, 70_000])
def test_both_roads_are_libsodiums_xchacha20poly1305(size):
    """Large messages go through OpenSSL: the bytes are libsodium's, both ways."""
    key = new_key()
    plain = os.urandom(size)
    sealed = seal(key, plain, ad())
    nonce, body = bytes(sealed[:24]), sealed[24:]  # a large one comes as a bytearray
    assert body == crypto_aead_xchacha20poly1305_ietf_encrypt(plain, ad(), nonce, bytes(key))
    theirs = nonce + crypto_aead_xchacha20poly1305_ietf_encrypt(plain, ad(), nonce, bytes(key))
    assert bytes(open_sealed(key, theirs, ad())) == plain
    padded = seal(key, plain, ad(), size + 1000)
    assert bytes(open_sealed(key, padded, ad())) == plain + bytes(1000)


@pytest.mark.parametrize("position", [0, 16, 23, 24, 40_000, -1])
def test_a_flipped_byte_of_a_large_message_fails_and_leaves_nothing(position):
    key = new_key()
    sealed = bytearray(seal(key, b"x" * (64 << 10), ad()))
    sealed[position] ^= 0x01
    out = bytearray(64 << 10)
    with pytest.raises(DecryptionError):
        open_sealed(key, bytes(sealed), ad(), out)
    assert out == bytes(64 << 10), "a forgery's decryption must not be left behind"


@pytest.mark.parametrize("position", [0, 10, 23, 24, 26, -1])
def test_any_flipped_byte_fails(position):
    key = new_key()
    sealed = bytearray(seal(key, b"some memory text", ad()))
    sealed[position] ^= 0x01
    with pytest.raises(DecryptionError):
        open_sealed(key, bytes(sealed), ad())


@pytest.mark.parametrize(
    "other",
    [
        ad(kind=Kind.META),
        ad(object_id=b"s" * 16),
        ad(generation=2),
        ad(version=2),
        ad(vault_id=bytes(16)),
    ],
)
def test_associated_data_binds_every_field(other):
    key = new_key()
    sealed = seal(key, b"x", ad())
    with pytest.raises(DecryptionError):
        open_sealed(key, sealed, other)


def test_wrong_key_fails_and_short_input_fails():
    sealed = seal(new_key(), b"x", ad())
    with pytest.raises(DecryptionError):
        open_sealed(new_key(), sealed, ad())
    with pytest.raises(DecryptionError):
        open_sealed(new_key(), b"short", ad())


def test_wipe_zeroes_buffer():
    key = new_key()
    assert any(key)
    wipe(key)
    assert key == bytearray(32)


def test_kdf_is_deterministic_and_salted():
    k1 = derive_key(bytearray(b"pw"), b"s" * 16, FAST_KDF)
    k2 = derive_key(bytearray(b"pw"), b"s" * 16, FAST_KDF)
    k3 = derive_key(bytearray(b"pw"), b"t" * 16, FAST_KDF)
    k4 = derive_key(bytearray(b"pw"), b"s" * 16, KdfParams(2, 8 * 1024, 1))
    assert k1 == k2 and len(k1) == 32
    assert k1 != k3 and k1 != k4


def test_default_kdf_is_at_least_rfc9106_second_recommendation():
    assert DEFAULT_KDF.time_cost >= 3
    assert DEFAULT_KDF.memory_kib >= 64 * 1024
    assert DEFAULT_KDF.parallelism >= 4


@pytest.mark.parametrize(
    "bad", [KdfParams(0, 8192, 1), KdfParams(1, 1024, 1), KdfParams(1, 8192, 0)]
)
def test_kdf_rejects_weak_or_invalid_parameters(bad):
    with pytest.raises(ValueError):
        bad.validate()


def test_keyslot_roundtrip_and_wrong_passphrase():
    master = new_key()
    slot = Keyslot.create(0, master, bytearray(b"pw"), FAST_KDF, 1, VAULT_ID)
    decoded = Keyslot.decode(slot.encode())
    assert decoded == slot
    assert decoded.unwrap(bytearray(b"pw"), 1, VAULT_ID) == master
    with pytest.raises(DecryptionError):
        decoded.unwrap(bytearray(b"wrong"), 1, VAULT_ID)


def test_keyslot_checksum_catches_damage_and_ad_catches_edited_params():
    master = new_key()
    slot = Keyslot.create(0, master, bytearray(b"pw"), FAST_KDF, 1, VAULT_ID)
    stored = bytearray(slot.encode())
    stored[5] ^= 0x20
    with pytest.raises(SlotChecksumError):
        Keyslot.decode(bytes(stored))
    # A deliberate edit that keeps the checksum valid still fails to unwrap.
    weaker = Keyslot(0, KdfParams(1, 8 * 1024, 2), slot.salt, slot.wrapped_key)
    with pytest.raises(DecryptionError):
        Keyslot.decode(weaker.encode()).unwrap(bytearray(b"pw"), 1, VAULT_ID)


def test_libsodium_is_initialised_before_use():
    """Without sodium_init() libsodium runs its reference code, three times slower."""
    import nacl._sodium as sodium

    from memvault.crypto import aead  # noqa: F401 - importing it initialises libsodium

    assert sodium.lib.sodium_init() == 1, "1: already initialised"


def test_keyed_blake2b_is_the_same_mac_on_both_paths():
    """libsodium computes long MACs, hashlib short ones: the same keyed BLAKE2b."""
    import hashlib
    import os

    from memvault.crypto.mac import LONG, KeyedBlake2b

    key = bytearray(os.urandom(32))
    mac = KeyedBlake2b(key, 32)
    for size in (0, 1, 100, LONG - 1, LONG, LONG + 1, 3 << 20):
        data = os.urandom(size)
        parts = [b"head", memoryview(data)[: size // 3], b"", bytearray(data[size // 3 :])]
        expected = hashlib.blake2b(b"head" + data, key=bytes(key), digest_size=32).digest()
        assert mac.mac(parts) == expected, size
    other = KeyedBlake2b(bytearray(os.urandom(32)), 32)
    assert other.mac([b"x" * LONG]) != mac.mac([b"x" * LONG])
