"""Issue 15, export and import: `memvault export --plaintext DIR | --jsonl FILE`
and `memvault import DIR | FILE.jsonl [--prefix P] [--dry-run]`, locked and
mounted; a round trip gives the same files (paths, bytes, modes, mtimes)."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

from memvault.vault import Vault

from ..conftest import FAST_KDF, PASSPHRASE, assert_one_line_error, reopen, run_cli
from ..fsutil import mounted

MEMORIES = {  # path: (content, mode, mtime_ns)
    "notes/a.md": (b"# A\nJWT keys rotate every thirty days.\n", 0o600, 1_700_000_000_123),
    "notes/deep/b.md": ("naïve ✓ UTF-8\n".encode(), 0o640, 1_600_000_000_000_000_000),
    "raw.bin": (bytes(range(256)) * 3, 0o600, 1_650_000_000_500_000_000),
    "top.md": (b"", 0o644, 1_690_000_000_000_000_000),
}


def fill(path) -> None:
    with Vault.create(path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        for name, (data, mode, mtime) in MEMORIES.items():
            vault.put(name, data, mode=mode, mtime_ns=mtime)


def files_of(path) -> dict[str, tuple[bytes, int, int]]:
    with reopen(path, readonly=True) as vault:
        return {
            m.path: (vault.get(m.path), m.mode, m.mtime_ns)
            for m in vault.walk()
            if m.type == "file"
        }


def new_vault(path) -> None:
    Vault.create(path, PASSPHRASE, kdf=FAST_KDF, compact_delay=None).close()


def test_a_plaintext_export_imported_into_a_new_vault_gives_the_same_files(tmp_path):
    source, copy, out = tmp_path / "a.vault", tmp_path / "b.vault", tmp_path / "out"
    fill(source)
    done = run_cli("export", "--plaintext", str(out), vault=source)
    assert done.returncode == 0, done.stderr
    assert "UNENCRYPTED" in done.stderr.decode()
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    for name, (data, mode, mtime) in MEMORIES.items():
        st = (out / name).stat()
        assert (out / name).read_bytes() == data
        assert (stat.S_IMODE(st.st_mode), st.st_mtime_ns) == (mode, mtime), name
    new_vault(copy)
    done = run_cli("import", str(out), vault=copy)
    assert done.returncode == 0, done.stderr
    assert "Imported 4 memories" in done.stderr.decode()
    assert files_of(copy) == files_of(source) == {k: v for k, v in MEMORIES.items()}


def test_a_jsonl_export_round_trips_any_bytes(tmp_path):
    source, copy, jsonl = tmp_path / "a.vault", tmp_path / "b.vault", tmp_path / "m.jsonl"
    fill(source)
    assert run_cli("export", "--jsonl", str(jsonl), vault=source).returncode == 0
    assert stat.S_IMODE(jsonl.stat().st_mode) == 0o600
    docs = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert [d["path"] for d in docs] == sorted(MEMORIES)
    assert docs[0]["content"].startswith("# A") and "content_base64" in docs[2]
    to_stdout = run_cli("export", "--jsonl", "-", vault=source)
    assert to_stdout.stdout == jsonl.read_bytes()
    new_vault(copy)
    assert run_cli("import", str(jsonl), vault=copy).returncode == 0
    assert files_of(copy) == files_of(source)


def test_export_never_writes_over_anything(tmp_path):
    source, out, jsonl = tmp_path / "a.vault", tmp_path / "out", tmp_path / "m.jsonl"
    fill(source)
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    refused = run_cli("export", "--plaintext", str(out), vault=source)
    assert "not empty" in assert_one_line_error(refused)
    assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    jsonl.write_text("mine")
    assert_one_line_error(run_cli("export", "--jsonl", str(jsonl), vault=source))
    assert jsonl.read_text() == "mine"
    usage = run_cli("export", vault=source)
    assert usage.returncode == 2 and "--plaintext" in assert_one_line_error(usage)


def test_import_checks_everything_before_writing_anything(tmp_path):
    target, tree = tmp_path / "t.vault", tmp_path / "tree"
    (tree / "notes").mkdir(parents=True)
    (tree / "notes" / "a.md").write_bytes(b"theirs\n")
    (tree / "notes" / "b.md").write_bytes(b"new\n")
    (tree / "same.md").write_bytes(b"same\n")
    with Vault.create(target, PASSPHRASE, kdf=FAST_KDF, compact_delay=None) as vault:
        vault.put("notes/a.md", b"mine\n")
        vault.put("same.md", b"same\n")
    before = files_of(target)

    clash = run_cli("import", str(tree), vault=target)
    assert "notes/a.md already holds other content" in assert_one_line_error(clash)
    assert files_of(target) == before, "nothing imported"

    dry = run_cli("import", str(tree), "--prefix", "theirs", "--dry-run", vault=target)
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.decode().split() == [
        "7",
        "theirs/notes/a.md",
        "4",
        "theirs/notes/b.md",
        "5",
        "theirs/same.md",
    ]
    assert files_of(target) == before, "a dry run writes nothing"

    (tree / "notes" / "a.md").write_bytes(b"mine\n")
    done = run_cli("import", str(tree), vault=target)
    assert done.returncode == 0, done.stderr
    assert "Imported 1 memories (2 already there, unchanged)." in done.stderr.decode()
    assert files_of(target)["notes/b.md"][0] == b"new\n"


def test_a_bad_jsonl_line_imports_nothing(tmp_path):
    target, jsonl = tmp_path / "t.vault", tmp_path / "m.jsonl"
    new_vault(target)
    good = {"path": "a.md", "content": "fine", "mode": "600", "mtime_ns": 1}
    jsonl.write_text(json.dumps(good) + "\n" + json.dumps({"content": "no path"}) + "\n")
    refused = run_cli("import", str(jsonl), vault=target)
    assert "Line 2" in assert_one_line_error(refused) and refused.returncode == 2
    assert files_of(target) == {}
    missing = run_cli("import", str(tmp_path / "nowhere"), vault=target)
    assert missing.returncode == 3 and assert_one_line_error(missing)


def test_export_and_import_through_a_mounted_vault(tmp_path):
    tree = tmp_path / "tree"
    (tree / "proj").mkdir(parents=True)
    (tree / "proj" / "auth.md").write_bytes(b"# Auth\nRotate keys monthly.\n")
    os.chmod(tree / "proj" / "auth.md", 0o640)
    os.utime(tree / "proj" / "auth.md", ns=(1_650_000_000_000_000_000,) * 2)
    with mounted(tmp_path) as m:
        done = m.cli("import", str(tree), "--prefix", "imported")
        assert done.returncode == 0, done.stderr
        st = (m.root / "imported" / "proj" / "auth.md").stat()
        assert (stat.S_IMODE(st.st_mode), st.st_mtime_ns) == (0o640, 1_650_000_000_000_000_000)
        out = tmp_path / "out"
        assert m.cli("export", "--plaintext", str(out)).returncode == 0
        copy = out / "imported" / "proj" / "auth.md"
        assert copy.read_bytes() == b"# Auth\nRotate keys monthly.\n"
        assert copy.stat().st_mtime_ns == 1_650_000_000_000_000_000


MAKE_COMPARTMENT_EXPORT = """
import sys
from compartment.vault import Vault
vault = Vault.create(sys.argv[1], "a passphrase for the peer")
vault.store("Deploys go through make release.", "test", _gate=False)
vault.store("JWT keys rotate every thirty days.", "test", namespace="work", tags=["auth"],
            _gate=False)
vault.save()
"""


def test_a_real_compartment_export_imports_with_namespaces_as_folders(tmp_path):
    """The peer a user would leave: Compartment 4.13.0 installed from PyPI in its
    own virtualenv, a vault made by its own code, exported by its own CLI."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
    from peer_env import peer_python

    exported = tmp_path / "compartment.jsonl"
    env = dict(
        os.environ, HOME=str(tmp_path), COMPARTMENT_EMBED_DAEMON="0", COMPARTMENT_ASSERT_OFFLINE="1"
    )
    python = peer_python()
    made = subprocess.run(
        [str(python), "-c", MAKE_COMPARTMENT_EXPORT, str(tmp_path / "c.vault")],
        env=env,
        capture_output=True,
        timeout=600,
    )
    assert made.returncode == 0, made.stderr.decode()[-2000:]
    export = subprocess.run(
        [
            str(python.with_name("compartment")),
            "--vault",
            str(tmp_path / "c.vault"),
            "export",
            "--plaintext",
            str(exported),
        ],
        env=dict(env, COMPARTMENT_PASSPHRASE="a passphrase for the peer"),
        capture_output=True,
        timeout=600,
    )
    assert export.returncode == 0, export.stderr.decode()[-2000:]
    records = [json.loads(line) for line in exported.read_text().splitlines()]
    target = tmp_path / "t.vault"
    new_vault(target)
    done = run_cli("import", str(exported), "--prefix", "compartment", vault=target)
    assert done.returncode == 0, done.stderr
    files = files_of(target)
    assert len(files) == len(records) == 2
    for record in records:
        data, mode, mtime = files[f"compartment/{record['namespace']}/{record['id']}.md"]
        assert data.decode().endswith(record["text"] + "\n")
        assert f"compartment_id: {record['id']}\n" in data.decode()
        assert mtime == int(record["created"] * 1e9) and mode == 0o600
    work = [d for p, (d, _, _) in files.items() if p.startswith("compartment/work/")]
    assert b"tags: auth\n" in work[0] and b"thirty days" in work[0]
