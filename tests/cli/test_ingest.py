"""`memvault ingest` over every fixture of tests/data/traces (copied to a
temporary directory first: SQLite creates -wal/-shm files beside a database
it opens, and some tests append to sessions)."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from memvault import ingest
from memvault.ingest import claude, codex, cursor
from memvault.ingest.render import destination, render
from memvault.ingest.sources import discover
from memvault.vault import Vault

from ..conftest import FAST_KDF, PASSPHRASE, assert_nowhere, assert_one_line_error, run_cli

TRACES = Path(__file__).resolve().parent.parent / "data" / "traces"
"""A copy of ../shared/fixtures/traces (with its SOURCES.md and licences), so
that a clone tests the same data wherever it is checked out."""
CODEMIE = "claude/real/codemie/projects/-tmp-private/4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl"
CODEX_DEMO = (
    "codex/synthetic/potsherd/sessions/2099/01/02/"
    "rollout-2099-01-02T08-30-00-d1d1d1d1-1111-4111-8111-111111111111.jsonl"
)
CURSOR_DEMO = (
    "cursor/agent-transcripts/synthetic-potsherd/projects/Users-example-demo-app/"
    "agent-transcripts/aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa/"
    "aaaaaaaa-aaaa-4aaa-8aaa-aaaaaaaaaaaa.jsonl"
)
CURSOR_DB = "cursor/state-vscdb-synthetic/User/globalStorage/state.vscdb"


@pytest.fixture
def traces(tmp_path: Path) -> Path:
    copy = tmp_path / "traces"
    shutil.copytree(TRACES, copy)
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


@pytest.fixture
def vault(tmp_path: Path):
    with Vault.create(
        tmp_path / "v" / "memory.vault", PASSPHRASE, kdf=FAST_KDF, compact_delay=None
    ) as v:
        yield v


def import_all(vault, roots: list[Path], **options) -> ingest.Summary:
    skipped: Counter = Counter()
    sources = ingest.collect(ingest.KINDS, {k: roots for k in ingest.KINDS}, skipped)
    summary = ingest.run(vault, sources, **options)
    summary.skipped.update(skipped)
    return summary


def memories(vault) -> dict[str, str]:
    return {
        m.path: vault.get(m.path).decode()
        for m in vault.walk()
        if m.path.startswith(("sessions/", "context/")) and not m.is_dir
    }


# -- parsers, one fixture at a time ---------------------------------------------------


def test_claude_session_prompts_tools_commands_files():
    session = claude.parse(TRACES / CODEMIE)
    assert (session.prompts, session.answers, session.tool_calls) == (3, 4, 6)
    assert list(session.commands) == ["rm hello.js"]
    assert "/tmp/private/hello.py" in session.files_edited
    assert session.project == "/tmp/private" and session.branch == "analytics-v2"
    text = render(session)
    assert "### User" in text and "update py with one liner comment" in text
    assert "- `rm hello.js`" in text.split("## Conversation")[0], "commands listed up top"
    dest = "sessions/claude/private/2025-12-10-create-hello.py-md-and-js-fb1b0257.md"
    assert destination(session) == dest


def test_claude_compaction_summary_is_not_a_prompt():
    spotter = TRACES / "claude/real/spotter"
    session = claude.parse(spotter / "compact_window_ae4a77f8_lines1471-1490.jsonl")
    summaries = [e for e in session.entries if e.role == "summary"]
    assert len(summaries) == 1 and "continued from a previous conversation" in summaries[0].text
    assert all(
        "continued from a previous conversation" not in e.text
        for e in session.entries
        if e.role == "user"
    )
    assert any("context compacted (manual" in e.text for e in session.entries)
    auto = claude.parse(spotter / "compact_window_258c7280_lines1247-1262.jsonl")
    assert auto.prompts == 0 and any(e.role == "summary" for e in auto.entries)


def test_claude_subagents_and_compaction_runs():
    skipped: Counter = Counter()
    sources = discover("claude", TRACES / "claude", skipped)
    names = {s.path.name for s in sources}
    assert "agent-aac57f5.jsonl" in names and "agent-36541525.jsonl" in names
    assert not any(n.startswith("agent-acompact") for n in names)
    assert skipped["compaction run (a copy of the conversation)"] == 1
    sub = claude.parse(next(s.path for s in sources if s.path.name == "agent-aac57f5.jsonl"))
    assert sub.parent_id == "ae4a77f8-aedd-4bc1-888f-c94edc91af04" and sub.tool_calls == 12
    legacy = claude.parse(next(s.path for s in sources if s.path.name == "agent-36541525.jsonl"))
    assert legacy.parent_id == "4c2ddfdc-b619-4525-8d03-1950fb1b0257"


def test_codex_prompts_come_from_user_messages_only():
    session = codex.parse(TRACES / CODEX_DEMO)
    assert (session.prompts, session.answers, session.tool_calls) == (2, 2, 2)
    assert session.title == "Changelog for the widget pipeline"  # from session_index.jsonl
    assert "/tmp/potsherd-codex-demo/CHANGELOG.md" in session.files_edited
    assert list(session.commands) == ["ls"]
    assert session.skipped["corrupt line"] == 1
    real = codex.parse(next((TRACES / "codex/real/codemie").glob("*turn1_lines1-19.jsonl")))
    prompts = [e.text for e in real.entries if e.role == "user"]
    assert len(prompts) == 1 and real.branch and real.project.endswith("codemie-code")
    text = render(real)
    for injected in ("AGENTS.md instructions", "<environment_context>", "<permissions"):
        assert injected not in text, "injected context is not a prompt"
    assert "gAAAA" not in text, "encrypted reasoning is never kept"
    assert real.tool_calls == 2 and real.commands


def test_codex_two_turn_session_and_patches():
    session = codex.parse(TRACES / "codex/synthetic/codemie/turn-2.jsonl")
    assert (session.prompts, session.answers) == (2, 2)
    patches = codex.parse(next((TRACES / "codex/real/codemie").glob("*apply_patch*.jsonl")))
    assert patches.tool_calls == 6 and len(patches.files_edited) >= 3


def test_cursor_transcript():
    session = cursor.parse_transcript(TRACES / CURSOR_DEMO)
    assert session.prompts == 3 and session.tool_calls == 7
    assert session.project == "/Users/example/demo-app"
    assert {
        "/Users/example/demo-app/src/health.ts",
        "/Users/example/demo-app/src/router.ts",
    } <= set(session.files_edited)
    assert session.skipped["corrupt line"] == 1
    assert session.skipped["duplicate record"] == 1
    assert session.skipped["injected continuation"] == 1
    assert session.started.startswith("2026-05-03T19:09")  # 12:39 AM at UTC+5:30


def test_cursor_state_db_reads_only_conversations(traces):
    sessions = [s for s in cursor.parse_store(traces / CURSOR_DB) if s.entries]
    assert {s.title for s in sessions} == {"Add health endpoint", "Legacy inline chat"}
    modern = next(s for s in sessions if s.title == "Add health endpoint")
    assert (modern.prompts, modern.answers, modern.tool_calls) == (1, 2, 3)
    assert list(modern.commands) == ["npm test -- router"]
    assert modern.project == "/Users/example/demo-app"
    legacy = next(s for s in sessions if s.title == "Legacy inline chat")
    assert legacy.project == "/Users/example/demo-app", "found through the workspace DB"
    text = "".join(render(s) for s in sessions)
    assert "FIXTURE-NOT-A-TOKEN" not in text and "orphan bubble" not in text


# -- whole runs into a vault ----------------------------------------------------------


def test_every_fixture_imports_and_rerun_stores_nothing(traces, vault, tmp_path):
    first = import_all(vault, [traces])
    stored = memories(vault)
    assert first.new == len(stored) == 22
    # 9 Claude files (the compaction run is skipped), the 8 Codex rollout files, 3 Cursor
    # transcripts and 2 of the 3 conversations in its state.vscdb (one is empty).
    assert Counter(path.split("/")[1] for path in stored) == {"claude": 9, "codex": 8, "cursor": 5}
    assert (first.prompts, first.tool_calls) == (23, 69)
    assert (
        first.skipped["corrupt line"] == 2
        and first.skipped["compaction run (a copy of the conversation)"] == 1
    )
    vault.sync()
    size = vault.path.stat().st_size
    again = import_all(vault, [traces])
    assert (again.new, again.updated, again.messages) == (0, 0, 0)
    assert first.skipped["session with no conversation"] == 1
    assert again.unchanged == first.new + 1, "the empty conversation is remembered too"
    assert memories(vault) == stored and vault.path.stat().st_size == size
    vault.close()
    words = [b"update py with one liner comment", b"npm test -- router", b"CHANGELOG.md"]
    assert_nowhere(words, vault.path.parent)


def test_appended_lines_add_exactly_those(traces, vault):
    session_file = traces / CODEMIE
    import_all(vault, [session_file])
    before = memories(vault)
    [(path, text)] = before.items()
    last = json.loads(session_file.read_text().splitlines()[-1])
    added = [
        dict(
            last,
            type="user",
            uuid="u-new-1",
            message={"role": "user", "content": "also add a zanzibar-flavoured README section"},
        ),
        dict(
            last,
            type="assistant",
            uuid="a-new-1",
            message={
                "id": "msg-new-1",
                "role": "assistant",
                "content": [{"type": "text", "text": "Added it."}],
            },
        ),
    ]
    with open(session_file, "a") as f:
        f.writelines(json.dumps(r) + "\n" for r in added)
    summary = import_all(vault, [session_file])
    assert (summary.updated, summary.new, summary.messages) == (1, 0, 2)
    after = memories(vault)[path]
    assert after.startswith(text.split("- messages:")[0])
    assert "zanzibar-flavoured README" in after and after.count("zanzibar") == 1
    assert "4 prompts, 5 answers" in after


def test_truncated_last_line_waits_and_corrupt_middle_line_is_skipped(traces, vault):
    session_file = traces / CODEMIE
    lines = session_file.read_bytes().splitlines(keepends=True)
    last = lines[-1]
    cut = len(last) // 2
    session_file.write_bytes(
        b"".join(lines[:5]) + b'{"type":"user","mess\n' + b"".join(lines[5:-1]) + last[:cut]
    )
    first = import_all(vault, [session_file])
    assert first.skipped["corrupt line"] == 1 and first.skipped["incomplete last line"] == 1
    with open(session_file, "ab") as f:  # the agent finishes writing the line
        f.write(last[cut:])
    second = import_all(vault, [session_file])
    assert second.skipped["incomplete last line"] == 0 and second.updated == 1
    assert "I've deleted hello.js" in next(iter(memories(vault).values()))


def test_secrets_are_redacted_unless_asked_not_to(traces, vault, tmp_path):
    session_file = traces / CODEMIE
    last = json.loads(session_file.read_text().splitlines()[-1])
    secrets = [
        "sk-proj-Zq8cPd3LmN0xRt5VbW2yKf7HsJ4gUe9A",
        "ghp_7Yh3Kd9LmQ2xWc5VbN8pRt4Zs1Ga6Fj0Ue3i",
        "hunter2hunter2",
    ]
    prompt = (
        f"my env dump:\nOPENAI_API_KEY={secrets[0]}\nGITHUB_TOKEN={secrets[1]}\n"
        f"DB_PASSWORD={secrets[2]}\nDEBUG=true"
    )
    record = dict(last, type="user", uuid="u-secret", message={"role": "user", "content": prompt})
    with open(session_file, "a") as f:
        f.write(json.dumps(record) + "\n")
    summary = import_all(vault, [session_file])
    assert summary.redactions == 3
    text = next(iter(memories(vault).values()))
    assert all(s not in text for s in secrets)
    assert "OPENAI_API_KEY=[REDACTED]" in text and "DEBUG=true" in text
    with Vault.create(
        tmp_path / "plain" / "v.vault", PASSPHRASE, kdf=FAST_KDF, compact_delay=None
    ) as kept:
        assert import_all(kept, [session_file], redact_secrets=False).redactions == 0
        assert secrets[0] in next(iter(memories(kept).values()))


def test_context_files_under_a_root(tmp_path, vault):
    root = tmp_path / "proj"
    for rel in (
        "CLAUDE.md",
        "AGENTS.md",
        "svc/AGENTS.md",
        ".cursorrules",
        ".cursor/rules/style.mdc",
        "node_modules/pkg/AGENTS.md",
        "README.md",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\nUse tabs in {rel}.\n")
    skipped: Counter = Counter()
    summary = ingest.run(vault, ingest.collect(["context"], {"context": [root]}, skipped))
    assert summary.new == 5
    assert set(memories(vault)) == {
        "context/proj/CLAUDE.md",
        "context/proj/AGENTS.md",
        "context/proj/svc/AGENTS.md",
        "context/proj/cursorrules.md",
        "context/proj/cursor/rules/style.mdc.md",
    }
    assert "Use tabs in svc/AGENTS.md." in vault.get("context/proj/svc/AGENTS.md").decode()


# -- the command line -----------------------------------------------------------------


def test_cli_dry_run_then_import(traces, tmp_path):
    vault_file = tmp_path / "cli" / "memory.vault"
    assert (
        run_cli(
            "init",
            "--kdf-time",
            "1",
            "--kdf-memory",
            "8",
            "--kdf-parallelism",
            "1",
            vault=vault_file,
        ).returncode
        == 0
    )
    dry = run_cli(
        "ingest", "claude", "--source", str(traces / "claude"), "--dry-run", vault=vault_file
    )
    out = dry.stdout.decode()
    assert dry.returncode == 0, dry.stderr
    assert "would import sessions/claude/private/2025-12-10-create-hello.py-md-and-js-fb" in out
    assert "dry run: 9 source(s) read: 9 new" in dry.stderr.decode()
    listing = run_cli("ls", "-R", vault=vault_file).stdout.decode()
    assert "sessions" not in listing, "a dry run writes nothing"
    done = run_cli("ingest", "claude", "--source", str(traces / "claude"), vault=vault_file)
    assert done.returncode == 0 and "9 new memory(ies)" in done.stderr.decode()
    assert "1 compaction run" in done.stderr.decode()
    missing = run_cli("ingest", "codex", "--source", str(tmp_path / "nope"), vault=vault_file)
    assert "Nothing to import at" in assert_one_line_error(missing)
    (tmp_path / "empty").mkdir()
    nothing = run_cli(
        "ingest", "codex", "--source", str(tmp_path / "empty"), vault=vault_file, passphrase=None
    )
    assert nothing.returncode == 0, "no passphrase is asked when there is nothing to import"
    assert b"Found no history in" in nothing.stderr


# -- while the vault is mounted ----------------------------------------------------------


@pytest.mark.model
def test_ingest_through_the_daemon_is_searchable_and_watch_keeps_importing(traces, tmp_path):
    from ..fsutil import mounted

    incoming = tmp_path / "incoming"
    incoming.mkdir()
    shutil.copy(traces / CODEMIE, incoming)
    (tmp_path / "m").mkdir()
    with mounted(tmp_path / "m") as m:
        done = m.cli("ingest", "claude", "--source", str(incoming))
        assert done.returncode == 0, done.stderr
        assert "1 new memory(ies)" in done.stderr.decode()
        dest = m.root / "sessions/claude/private/2025-12-10-create-hello.py-md-and-js-fb1b0257.md"
        assert "update py with one liner comment" in dest.read_text()
        found = (m.root / "search" / "update py with one liner comment?k=3").read_text()
        assert "2025-12-10-create-hello.py-md-and-js-fb1b0257.md" in found.split("\n2.")[0]

        watcher = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memvault",
                "ingest",
                "codex",
                "--source",
                str(incoming),
                "--watch",
                "--interval",
                "0.2",
            ],
            env=m.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            shutil.copy(traces / CODEX_DEMO, incoming)
            expected = m.root / "sessions/codex/potsherd-codex-demo"
            deadline = time.monotonic() + 60
            while not (expected.is_dir() and any(expected.iterdir())):
                assert time.monotonic() < deadline, "--watch did not import the new session"
                time.sleep(0.1)
        finally:
            watcher.send_signal(signal.SIGINT)
            out, err = watcher.communicate(timeout=30)
        assert watcher.returncode == 0, err
        assert b"Traceback" not in err
    assert_nowhere([b"update py with one liner comment"], m.vault.parent)


@pytest.mark.parametrize("name", ["claudeconvo_1_0_70.json", "claudeconvo_1_0_108.json"])
def test_claude_1_0_records_parse(tmp_path, name):
    """Mid-2025 CLI records (per-type samples) go through the same parser."""
    doc = json.loads((TRACES / "claude/legacy-1.0.x" / name).read_text())
    lines = [r for records in doc["entry_types"].values() for r in records]
    path = tmp_path / "session-xxx.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    session = claude.parse(path)
    assert session.prompts >= 1 and session.answers >= 1
    assert session.skipped["unknown record type"] == 0
    first = next(r for r in lines if r.get("cwd"))
    assert (session.project, session.branch) == (first["cwd"], first["gitBranch"])


# fmt: off
@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ("export ANTHROPIC_API_KEY=sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWx", "AbCdEfGhIjKlMnOp"),
        ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
        ('"password": "correct-horse-42"', "correct-horse-42"),
        ("curl -H 'Authorization: Bearer abcdef0123456789abcdef'", "abcdef0123456789abcdef"),
        ("postgres://app:s3cr3tpw@db.internal:5432/app", "s3cr3tpw"),
        ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----",
         "b3BlbnNzaC1rZXk"),
    ],
)
# fmt: on
def test_redaction_catches_common_credentials(line, secret):
    from memvault.ingest.redact import redact

    text, count = redact(f"before\n{line}\nafter")
    assert secret not in text and count >= 1 and "[REDACTED]" in text
    assert text.startswith("before\n") and text.endswith("\nafter")


def test_redaction_leaves_ordinary_text_alone():
    from memvault.ingest.redact import redact

    ordinary = ("Set PASSWORD=${DB_PASSWORD} in the env file; the token bucket refills at 10/s.\n"
                "def check_password(user): ...\nkey = cache_key(request)")
    assert redact(ordinary) == (ordinary, 0)
