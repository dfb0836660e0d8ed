"""A single flipped byte anywhere in the vault file, LMDB's own pages included,
gives the right answer or a clear error: never a crash, a hang or wrong content."""

from __future__ import annotations

import hashlib
import json
import os
import random
import select
import signal
import time
import traceback

import pytest

from memvault import errors
from memvault.errors import MemoryCorrupted, MemvaultError

from .. import rawvault
from ..conftest import forget_vaults_seen, reopen

TRIAL_TIMEOUT_S = 60
PAGE = 4096


def _read_everything(path, expected: dict[str, str]) -> dict:
    """Open the damaged vault and read every memory; classify each outcome."""
    try:
        vault = reopen(path, readonly=True)
    except MemvaultError as exc:
        return {"open_error": type(exc).__name__, "message": str(exc)}
    with vault:
        results = {}
        listed = {m.path for m in vault.walk() if m.type == "file"}
        for name, digest in expected.items():
            try:
                data = vault.get(name)
                results[name] = "ok" if hashlib.sha256(data).hexdigest() == digest else "WRONG"
            except MemoryCorrupted as exc:
                results[name] = "corrupted" if name in str(exc) else "unnamed"
            except MemvaultError as exc:
                results[name] = type(exc).__name__
        return {
            "results": results,
            "unexpected_paths": sorted(listed - set(expected)),
            "damaged": len(vault.damaged),
        }


def _in_child(path, expected) -> tuple[str, dict | str]:
    """Run the read in a forked child so that a crash or hang is observed, not suffered."""
    rfd, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        try:
            out = json.dumps(_read_everything(path, expected)).encode()
            code = 0
        except BaseException:
            out, code = traceback.format_exc().encode(), 1
        with os.fdopen(wfd, "wb") as pipe:
            pipe.write(out)
        os._exit(code)
    os.close(wfd)
    chunks = []
    deadline = time.monotonic() + TRIAL_TIMEOUT_S
    with os.fdopen(rfd, "rb") as pipe:
        while True:
            ready, _, _ = select.select([pipe], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return "hang", ""
            chunk = os.read(pipe.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    body = b"".join(chunks).decode(errors="replace")
    if os.WIFSIGNALED(status):
        return f"crash ({signal.Signals(os.WTERMSIG(status)).name})", body
    if os.WEXITSTATUS(status) != 0:
        return "traceback", body
    return "ran", json.loads(body)


@pytest.fixture(scope="module")
def damaged_vault_template(tmp_path_factory):
    """A closed vault with small, overflow-sized and moved memories and some shreds."""
    from memvault.vault import Vault

    from ..conftest import FAST_KDF, PASSPHRASE

    path = tmp_path_factory.mktemp("template") / "memory.vault"
    rng = random.Random(7)
    expected = {}
    with Vault.create(path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as v:
        for i in range(40):
            size = rng.choice([120, 900, 1800, 5000, 9000])
            data = bytes(rng.getrandbits(8) for _ in range(size))
            name = f"d{i % 4}/m{i}.md"
            v.put(name, data)
            expected[name] = hashlib.sha256(data).hexdigest()
        for i in range(0, 40, 7):
            v.rename(f"d{i % 4}/m{i}.md", f"moved/m{i}.md")
            expected[f"moved/m{i}.md"] = expected.pop(f"d{i % 4}/m{i}.md")
        for i in (1, 2, 3):
            v.delete(f"d{i % 4}/m{i}.md")
            del expected[f"d{i % 4}/m{i}.md"]
        v.put("d0/m4.md", b"rewritten after the shreds")
        expected["d0/m4.md"] = hashlib.sha256(b"rewritten after the shreds").hexdigest()
    return path.read_bytes(), expected


def _offsets(size: int) -> list[int]:
    spread = list(range(0, size, max(1, size // 160)))
    # Both LMDB meta pages, field by field (magic, version, roots, txnid...).
    meta_fields = [page * PAGE + off for page in (0, 1) for off in range(16, 160, 8)]
    rng = random.Random(11)
    return sorted(set(spread + meta_fields + rng.sample(range(size), 40)))


@pytest.mark.parametrize("unlock_mode", ["snapshot", "full-check"])
def test_single_flipped_byte_anywhere(damaged_vault_template, tmp_path, unlock_mode):
    original, expected = damaged_vault_template
    path = tmp_path / "memory.vault"
    path.write_bytes(original)
    if unlock_mode == "full-check":
        rawvault.drop_snapshot(path)
        # Settle as the vault itself would, so both LMDB meta pages agree.
        with rawvault.raw(path, write=True) as (txn, dbs):
            txn.put(b"settled", b"", db=dbs["state"])
        original = path.read_bytes()
    baseline = _in_child(path, expected)
    assert baseline[0] == "ran" and set(baseline[1]["results"].values()) == {"ok"}, baseline

    outcomes: dict[str, int] = {}
    rng = random.Random(3)
    for offset in _offsets(len(original)):
        damaged = bytearray(original)
        damaged[offset] ^= rng.choice([0x01, 0x80, 0xFF, 0x10])
        path.write_bytes(bytes(damaged))
        for stale in (tmp_path / "memory.vault-lock",):
            stale.unlink(missing_ok=True)
        kind, result = _in_child(path, expected)
        assert kind == "ran", f"offset {offset}: {kind}\n{result}"
        if "open_error" in result:
            assert result["message"], result
            outcomes[result["open_error"]] = outcomes.get(result["open_error"], 0) + 1
            continue
        assert result["unexpected_paths"] == [], f"offset {offset}: {result}"
        for name, verdict in result["results"].items():
            assert verdict != "WRONG", f"offset {offset}: wrong content for {name}"
            assert verdict != "unnamed", f"offset {offset}: error does not name {name}"
            if verdict == "MemoryNotFound":
                assert result["damaged"] > 0, f"offset {offset}: {name} vanished silently"
            else:
                assert verdict in ("ok", "corrupted"), f"offset {offset}: {name}: {verdict}"
        clean = all(v == "ok" for v in result["results"].values())
        key = "right answer" if clean else "per-memory errors"
        outcomes[key] = outcomes.get(key, 0) + 1
    print("outcomes of single-byte flips:", outcomes)
    assert outcomes.get("right answer", 0) > 0
    assert sum(v for k, v in outcomes.items() if k != "right answer") > 0


# -- one damaged record or meta page never locks out the whole vault ---------------


def _node_at(data: bytes, record_id: bytes, value: bytes) -> int:
    """Offset of the records-database node of a record (its key, then its value)."""
    at = data.find(record_id + value[:32])
    assert at >= 0, "the record's node is not in the file"
    return at


@pytest.fixture
def three_memories(vault_path):
    from memvault.vault import Vault

    from ..conftest import FAST_KDF, PASSPHRASE

    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as v:
        for name in ("a.md", "victim.md", "z.md"):
            v.put(name, f"content of {name} ".encode() * 20)
        rid, value, _ = rawvault.record_for(vault_path, v, "victim.md")
    rawvault.drop_snapshot(vault_path)  # the slow path: every record is checked
    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        txn.put(b"settled", b"", db=dbs["state"])
    return rid, value


def test_flipped_record_id_names_the_memory_and_repair_recovers_it(vault_path, three_memories):
    rid, value = three_memories
    data = bytearray(vault_path.read_bytes())
    data[_node_at(bytes(data), rid, value) + 5] ^= 0x40
    vault_path.write_bytes(bytes(data))
    with reopen(vault_path, readonly=True) as ro:  # the rest stays readable
        assert ro.get("a.md").startswith(b"content of a.md")
        assert "victim.md" in ro.describe_damage()
    with pytest.raises(errors.VaultDamaged, match="victim.md"):
        reopen(vault_path)
    with reopen(vault_path, repair=True) as v:
        assert v.repair() == ["recovered victim.md"]
    with reopen(vault_path) as v:
        assert v.get("victim.md") == b"content of victim.md " * 20


def test_flipped_sealed_generation_is_harmless(vault_path, three_memories):
    rid, value = three_memories
    data = bytearray(vault_path.read_bytes())
    data[_node_at(bytes(data), rid, value) + 16 + 30] ^= 0x01  # inside the sealed generation
    vault_path.write_bytes(bytes(data))
    with reopen(vault_path) as v:
        assert v.get("victim.md") == b"content of victim.md " * 20 and not v.damaged


@pytest.mark.parametrize("page", [0, 1])
def test_zeroed_meta_page_falls_back_to_the_intact_one(vault_path, three_memories, page):
    data = bytearray(vault_path.read_bytes())
    data[page * PAGE : (page + 1) * PAGE] = bytes(PAGE)
    vault_path.write_bytes(bytes(data))
    with reopen(vault_path, readonly=True) as ro:
        assert ro.get("z.md").startswith(b"content of z.md")
    with reopen(vault_path) as v:
        v.put("new.md", b"still writable")
    with reopen(vault_path) as v:
        assert v.get("new.md") == b"still writable"


def test_no_single_flip_in_a_record_locks_out_the_vault(vault_path, three_memories):
    """Every byte of one record's LMDB node (LMDB's node header, the id, the sealed
    generation, metadata and the start of the body): the other memories always stay
    readable, the damaged one is named or reads right, and `repair` makes the vault
    writable again with the others intact."""
    rid, value = three_memories
    original = vault_path.read_bytes()
    node = _node_at(original, rid, value) - 8  # LMDB's node header comes first
    others = {
        "a.md": hashlib.sha256(b"content of a.md " * 20).hexdigest(),
        "z.md": hashlib.sha256(b"content of z.md " * 20).hexdigest(),
    }
    for offset in range(node, node + 8 + 16 + 48 + 4 + 200):
        forget_vaults_seen()  # each flip starts from the same file, older than a repair
        damaged = bytearray(original)
        damaged[offset] ^= 0x10
        vault_path.write_bytes(bytes(damaged))
        kind, result = _in_child(vault_path, others)
        assert kind == "ran", f"offset {offset - node}: {kind}\n{result}"
        assert "open_error" not in result, (offset - node, result)
        assert set(result["results"].values()) == {"ok"}, (offset - node, result)
        if offset - node < 8:
            with reopen(vault_path, repair=True) as v:
                v.repair(accept_unverified=True)
            with reopen(vault_path) as v:
                assert {n for n in others if v.exists(n)} == set(others)
        assert sorted(p.name for p in vault_path.parent.iterdir()) == [
            "memory.vault",
            "memory.vault-lock",
            "memory.vault-reserve",
        ], "a salvage copy must not outlive the process that made it"


def _killed_journaled_write(vault_path, name: str) -> None:
    """A mount daemon that journaled one more memory, then was killed."""
    import subprocess
    import sys

    from ..conftest import PASSPHRASE

    script = (
        "import os, sys\n"
        "from memvault.vault import Vault\n"
        "v = Vault.open(sys.argv[1], sys.argv[2].encode(), compact_delay=None, journal=True)\n"
        f"v.put({name!r}, b'journaled')\n"
        "os.kill(os.getpid(), 9)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(vault_path), PASSPHRASE.decode()])
    assert done.returncode == -signal.SIGKILL


def test_damaged_structure_keeps_a_killed_daemons_journal_through_repair(
    vault_path, three_memories
):
    rid, value = three_memories
    _killed_journaled_write(vault_path, "c.md")
    data = bytearray(vault_path.read_bytes())
    data[_node_at(bytes(data), rid, value) - 1] ^= 0x10  # LMDB's key size: the tree is broken
    vault_path.write_bytes(bytes(data))
    with pytest.raises(errors.VaultDamaged):
        reopen(vault_path, journal=True)  # what `unlock` does: refused, and nothing lost
    with reopen(vault_path, readonly=True) as ro:
        assert ro.get("c.md") == b"journaled"
    with reopen(vault_path, repair=True) as v:
        v.repair(accept_unverified=True)
    with reopen(vault_path) as v:
        assert v.get("c.md") == b"journaled" and v.get("a.md").startswith(b"content of a.md")


def test_a_rollback_hidden_behind_a_junk_record_is_not_repaired_silently(vault_path):
    from memvault.vault import Vault

    from ..conftest import FAST_KDF, PASSPHRASE

    with Vault.create(vault_path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as v:
        v.put("policy.md", b"allow: nothing")
        v.put("other.md", b"x")
        rid, old, _ = rawvault.record_for(vault_path, v, "policy.md")
    with reopen(vault_path) as v:
        v.put("policy.md", b"allow: everything revoked")
    with rawvault.raw(vault_path, write=True) as (txn, dbs):
        txn.put(rid, old, db=dbs["records"])  # the old version back...
        txn.put(os.urandom(16), os.urandom(200), db=dbs["records"])  # ...behind some junk
    with reopen(vault_path, readonly=True) as ro:
        assert "integrity sum" in ro.describe_damage()
    with reopen(vault_path, repair=True) as v, pytest.raises(errors.VaultTampered):
        v.repair()
    with reopen(vault_path, repair=True) as v:  # only when the user accepts it explicitly
        assert any("accepted" in line for line in v.repair(accept_unverified=True))
