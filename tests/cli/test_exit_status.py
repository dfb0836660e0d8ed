"""Every kind of failure a user can cause ends with its own exit status and
one sentence on stderr (errors.py lists them; so does `memvault --help`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from memvault.errors import (
    EXIT_DAMAGED,
    EXIT_IN_USE,
    EXIT_INTERRUPTED,
    EXIT_NOT_FOUND,
    EXIT_PASSPHRASE,
    EXIT_STATUSES,
    EXIT_USAGE,
)

from .. import rawvault
from ..conftest import KDF_ARGS, assert_one_line_error, reopen, run_cli


@pytest.fixture
def created(vault_path):
    assert run_cli("init", *KDF_ARGS, vault=vault_path).returncode == 0
    assert run_cli("put", "a.md", vault=vault_path, input=b"alpha").returncode == 0
    return vault_path


@pytest.mark.parametrize(
    "args",
    [
        ["search", "foo", "-k", "99"],
        ["search", "foo", "-k", "many"],
        ["search"],
        ["bogus"],
        ["ls", "--no-such-option"],
        ["get", "../escape.md"],
        ["put", "search/x.md"],
        ["init", "--kdf-memory", "1"],
        ["init", "--kdf-time", "x"],
    ],
)
def test_usage_errors_exit_2(created, args):
    done = run_cli(*args, vault=created)
    line = assert_one_line_error(done)
    assert done.returncode == EXIT_USAGE, (done.returncode, line)
    assert "internal error" not in line and "usage:" not in line, line


def test_not_found_exits_3(created, tmp_path):
    for args, vault in (
        (["get", "missing.md"], created),
        (["get", "a.md"], tmp_path / "no" / "such.vault"),
        (["ingest", "codex", "--source", str(tmp_path / "nope")], created),
    ):
        done = run_cli(*args, vault=vault)
        assert_one_line_error(done)
        assert done.returncode == EXIT_NOT_FOUND, (args, done.stderr)


def test_wrong_passphrase_exits_4(created):
    done = run_cli("get", "a.md", vault=created, passphrase=b"not the passphrase")
    assert "Wrong passphrase" in assert_one_line_error(done)
    assert done.returncode == EXIT_PASSPHRASE


def test_a_vault_in_use_exits_6(created):
    with reopen(created):  # this process holds the writer's lock
        done = run_cli("put", "b.md", vault=created, input=b"beta")
        assert "in use" in assert_one_line_error(done)
        assert done.returncode == EXIT_IN_USE


def test_a_damaged_memory_exits_7(created):
    with reopen(created) as vault:
        _, value, _ = rawvault.record_for(created, vault, "a.md")
    _, body = rawvault.split(value)
    rawvault.flip_in_file(created, body[-24:], 3)
    done = run_cli("get", "a.md", vault=created)
    assert "a.md" in assert_one_line_error(done)
    assert done.returncode == EXIT_DAMAGED


def test_ctrl_c_exits_130(created):
    from ..conftest import PASSPHRASE

    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env.update(MEMVAULT_VAULT=str(created), MEMVAULT_PASSPHRASE=PASSPHRASE.decode())
    lock_file = created.with_name(created.name + "-lock")
    put = subprocess.Popen(
        [sys.executable, "-m", "memvault", "put", "c.md"],
        stdin=subprocess.PIPE,  # left open: put waits for the rest of its input
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        put.stdin.write(b"partial")
        put.stdin.flush()
        deadline = time.monotonic() + 60
        while lock_file.read_text().strip() != str(put.pid):  # the vault is open: it reads
            assert time.monotonic() < deadline and put.poll() is None, "put did not start"
            time.sleep(0.05)
        time.sleep(0.2)
        put.send_signal(signal.SIGINT)
        _, err = put.communicate(timeout=30)
    finally:
        put.kill()
    assert put.returncode == EXIT_INTERRUPTED, err
    assert err.decode().strip() == "memvault: interrupted."
    assert run_cli("get", "c.md", vault=created).returncode == EXIT_NOT_FOUND, "nothing stored"


def test_help_lists_every_exit_status():
    text = run_cli("--help").stdout.decode()
    for code, meaning in EXIT_STATUSES.items():
        assert f"{code:>3}  {meaning}" in text
