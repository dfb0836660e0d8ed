"""The `memvault` command as a user runs it: a subprocess, real files."""

from __future__ import annotations

import pytest

from memvault.vault.header import FORMAT_VERSION

from ..conftest import KDF_ARGS, PASSPHRASE, assert_one_line_error, run_cli


def init(vault_path):
    result = run_cli(
        "init",
        "--passphrase-stdin",
        *KDF_ARGS,
        vault=vault_path,
        input=PASSPHRASE + b"\n",
        passphrase=None,
    )
    assert result.returncode == 0, result.stderr
    return result


def test_full_cycle(vault_path):
    assert "Created the vault" in init(vault_path).stderr.decode()
    assert oct(vault_path.stat().st_mode & 0o777) == "0o600"
    note = "# API\n- deploys go through `make release`\n- naïve UTF-8 ✓\n".encode()
    assert run_cli("put", "projects/api.md", vault=vault_path, input=note).returncode == 0
    assert run_cli("get", "projects/api.md", vault=vault_path).stdout == note
    assert run_cli("ls", vault=vault_path).stdout == b"projects/\n"
    long = run_cli("ls", "-l", "projects", vault=vault_path).stdout.decode()
    assert "api.md" in long and str(len(note)) in long
    assert run_cli("mv", "projects/api.md", "projects/service.md", vault=vault_path).returncode == 0
    assert run_cli("ls", "-R", vault=vault_path).stdout == b"projects/\nprojects/service.md\n"
    assert run_cli("rm", "projects/service.md", vault=vault_path).returncode == 0
    assert run_cli("ls", "projects", vault=vault_path).stdout == b""
    compact = run_cli("compact", vault=vault_path)
    assert compact.returncode == 0 and "Compacted" in compact.stderr.decode()


def test_passphrase_from_stdin_then_content(vault_path):
    init(vault_path)
    result = run_cli(
        "put",
        "a.md",
        "--passphrase-stdin",
        vault=vault_path,
        input=PASSPHRASE + b"\nline one\nline two\n",
        passphrase=None,
    )
    assert result.returncode == 0, result.stderr
    got = run_cli("get", "a.md", vault=vault_path)
    assert got.stdout == b"line one\nline two\n"


def test_vault_option_overrides_environment(vault_path, tmp_path):
    init(vault_path)
    result = run_cli("status", "--vault", str(vault_path), vault=tmp_path / "other.vault")
    assert result.returncode == 0 and str(vault_path) in result.stdout.decode()


def test_status_needs_no_passphrase(vault_path):
    init(vault_path)
    out = run_cli("status", vault=vault_path, passphrase=None)
    text = out.stdout.decode()
    assert out.returncode == 0, out.stderr
    for expected in (
        f"format:    memvault format {FORMAT_VERSION}",
        "created:",
        "size:",
        "keyslots:  1",
        "slot 0: argon2id t=1 m=8 MiB p=1",
        "locked",
    ):
        assert expected in text, text


def test_init_refuses_to_overwrite(vault_path):
    init(vault_path)
    before = vault_path.read_bytes()
    result = run_cli(
        "init", "--passphrase-stdin", vault=vault_path, input=b"other\n", passphrase=None
    )
    assert "refusing to overwrite" in assert_one_line_error(result)
    assert vault_path.read_bytes() == before


def test_init_rejects_empty_passphrase(vault_path):
    result = run_cli("init", "--passphrase-stdin", vault=vault_path, input=b"\n", passphrase=None)
    assert "empty" in assert_one_line_error(result)
    assert not vault_path.exists()


def test_no_passphrase_without_terminal(vault_path):
    init(vault_path)
    result = run_cli("ls", vault=vault_path, passphrase=None)
    assert "--passphrase-stdin" in assert_one_line_error(result)


def test_one_sentence_errors(vault_path, tmp_path):
    missing = run_cli("ls", vault=tmp_path / "none.vault")
    assert "No vault at" in assert_one_line_error(missing)
    init(vault_path)
    cases = {
        ("get", "nothing.md"): "No memory at",
        ("put", "../escape.md"): "Invalid memory path",
        ("put", "a//b.md"): "empty file or directory name",
        ("put", "search/x.md"): "reserved",
        ("mv", "nothing.md", "b.md"): "No memory at",
        ("rm", "nothing.md"): "No memory at",
    }
    for args, expected in cases.items():
        line = assert_one_line_error(run_cli(*args, vault=vault_path))
        assert expected in line, (args, line)
    junk = tmp_path / "junk.vault"
    junk.write_bytes(b"not a vault at all" * 1000)
    assert "not a memvault vault" in assert_one_line_error(run_cli("ls", vault=junk))


def test_vault_in_use_by_another_process(vault_path):
    from ..conftest import reopen

    init(vault_path)
    with reopen(vault_path):
        line = assert_one_line_error(run_cli("put", "a.md", vault=vault_path, input=b"x"))
        assert "in use by another memvault process" in line
        # status still works while the vault is held open.
        out = run_cli("status", vault=vault_path, passphrase=None)
        assert out.returncode == 0 and "open for writing by process" in out.stdout.decode()


def test_help_lists_every_command():
    out = run_cli("--help").stdout.decode()
    for command in ("init", "status", "put", "get", "ls", "rm", "mv", "compact"):
        assert command in out
    assert "--passphrase-stdin" in run_cli("put", "--help").stdout.decode()


def _run_in_terminal(args, answers, env):
    """Run memvault on a pseudo-terminal, answering each prompt; return (status, screen)."""
    import os
    import pty
    import select
    import sys
    import time

    pid, fd = pty.fork()
    if pid == 0:  # child
        os.execvpe(sys.executable, [sys.executable, "-m", "memvault", *args], env)
    screen = b""
    pending = list(answers)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            os.kill(pid, 9)
            break
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            break
        if not chunk:
            break
        screen += chunk
        # Answer each prompt once, only after it is shown: getpass turns echo
        # off before printing it and flushes input typed earlier.
        prompts = screen.count(b"Passphrase")
        if pending and prompts > len(answers) - len(pending) and screen.endswith(b": "):
            os.write(fd, pending.pop(0) + b"\n")
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    return os.waitstatus_to_exitcode(status), screen.decode(errors="replace")


def test_init_prompts_twice_without_echo(vault_path):
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env["MEMVAULT_VAULT"] = str(vault_path)
    secret = b"tty-secret-passphrase-1234"
    code, screen = _run_in_terminal(["init", *KDF_ARGS], [secret, secret], env)
    assert code == 0, screen
    assert "Passphrase (again)" in screen and "Created the vault" in screen
    assert secret.decode() not in screen, "the passphrase was echoed"
    code, screen = _run_in_terminal(["ls"], [secret], env)
    assert code == 0, screen

    other = vault_path.with_name("other.vault")
    env["MEMVAULT_VAULT"] = str(other)
    code, screen = _run_in_terminal(["init", *KDF_ARGS], [secret, b"different"], env)
    assert code == 2 and "do not match" in screen  # a usage error
    assert not other.exists()


@pytest.mark.model
def test_search_without_a_mount(vault_path):
    init(vault_path)
    note = b"# Deploy\nDeploys go through make release.\n"
    assert run_cli("put", "projects/deploy.md", vault=vault_path, input=note).returncode == 0
    assert (
        run_cli("put", "other.md", vault=vault_path, input=b"# Cats\nThey sleep.\n").returncode == 0
    )
    out = run_cli("search", "how", "do", "we", "ship", "a", "release", vault=vault_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.decode().splitlines()[2].startswith("1. **projects/deploy.md**")
    none = run_cli("search", "quantum", "gluon", "lattice", vault=vault_path)
    assert b"No memory matches" in none.stdout


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["foo", "-k", "99"], "k must be a whole number between 1 and 50, not 99."),
        (["foo", "-k", "0"], "not 0."),
        (["foo", "-k", "many"], "not many."),
        (["  "], "The search query is empty."),
        (["foo", "--in", "a/../b"], "'..' is not allowed as a name"),
        (["foo", "--in", "search/x"], "reserved for queries"),
    ],
)
def test_a_bad_search_is_a_usage_error(vault_path, args, words):
    """Checked before the vault is opened (no passphrase asked): one sentence, exit 2."""
    init(vault_path)
    done = run_cli("search", *args, vault=vault_path, passphrase=None)
    line = assert_one_line_error(done)
    assert done.returncode == 2, (done.returncode, line)
    assert words in line and "internal error" not in line, line


@pytest.mark.model
def test_search_refuses_another_model_until_reindex(vault_path):
    from ..conftest import reopen

    init(vault_path)
    assert (
        run_cli("put", "a.md", vault=vault_path, input=b"# Deploy\nmake release\n").returncode == 0
    )
    with reopen(vault_path) as v:
        v.pin_model("0" * 64)  # as if made with another model
    line = assert_one_line_error(run_cli("search", "deploy", vault=vault_path))
    assert "memvault reindex" in line and "000000000000" in line
    done = run_cli("reindex", vault=vault_path)
    assert done.returncode == 0 and "pinned to embedding model" in done.stderr.decode()
    found = run_cli("search", "deploy", vault=vault_path)
    assert found.returncode == 0 and b"a.md" in found.stdout
    with reopen(vault_path, readonly=True) as v:
        assert v.pinned_model() != "0" * 64
