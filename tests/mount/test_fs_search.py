"""search/ on a real mount: meaning, exact tokens, read-your-writes, renames, shreds."""

from __future__ import annotations

import errno
import itertools
import json
import os
import threading
import time

import pytest

from ..fsutil import mounted

pytestmark = pytest.mark.model  # the real embedding model

TOPICS = {
    "projects/api/deploy.md": "# Deploy\nDeploys go through `make release`; never push tags.",
    "projects/api/database.md": "# Database\nWe run postgres 16; migrations use alembic.",
    "projects/web/websocket.md": "# Websocket\nThe client fails with ERR_CONN_RESET at the proxy.",
    "team/lunch.md": "# Lunch\nThe team likes the ramen place near the office on Fridays.",
    "code/utils.md": "# Utils\n`compute_checksum(data)` returns the sha256 hex digest of a file.",
    "team/oncall.md": "# On-call\nThe pager rotates weekly; escalate to the SRE lead after 30 min.",
}
FILLER = [f"notes/misc-{i}.md" for i in range(24)]


def query(root, name):
    path = root / "search" / name
    data = path.read_bytes()
    assert os.stat(path).st_size == len(data), "stat must report the true size"
    return data.decode()


def first_path(root, name):
    doc = json.loads(query(root, name + ".json"))
    return doc["results"][0]["path"] if doc["results"] else None


@pytest.fixture(scope="module")
def mnt(tmp_path_factory):
    with mounted(tmp_path_factory.mktemp("search")) as m:
        for rel, text in TOPICS.items():
            (m.root / rel).parent.mkdir(parents=True, exist_ok=True)
            (m.root / rel).write_text(text + "\n")
        for i, rel in enumerate(FILLER):
            (m.root / rel).parent.mkdir(parents=True, exist_ok=True)
            (m.root / rel).write_text(
                f"# Misc {i}\nA note about item number {i} of the inventory.\n"
            )
        # Embeddings are computed in the background, once files are quiet: wait
        # until the daemon says every memory has its vectors.
        deadline = time.monotonic() + 180
        while index_state(m) != "ready":
            assert time.monotonic() < deadline, "embeddings never caught up"
            time.sleep(0.5)
        yield m


def daemon_status(m) -> dict:
    done = m.cli("status", "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout).get("daemon", {})


def index_state(m) -> str:
    return daemon_status(m).get("search_index", "")


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("how do we ship a new release", "projects/api/deploy.md"),
        ("which relational database do we use", "projects/api/database.md"),
        ("where does the team go to eat", "team/lunch.md"),
        ("who do I call when production is down at night", "team/oncall.md"),
        ("ERR_CONN_RESET", "projects/web/websocket.md"),
        ("compute_checksum", "code/utils.md"),
    ],
)
def test_finds_by_paraphrase_and_by_rare_token(mnt, words, expected):
    assert first_path(mnt.root, words) == expected
    text = query(mnt.root, words)
    assert f"**{mnt.root}/{expected}**" in text and "lines 1–2" in text


def test_nothing_relevant_says_so(mnt):
    assert "No memory matches" in query(mnt.root, "quantum chromodynamics lattice gluons")


def test_status_shows_the_memory_release_a_query_leaves_due(mnt):
    """The release of a query's freed memory comes a moment later, in the
    background: status lists it until it has run (a benchmark waits for it)."""
    stop = threading.Event()

    def keep_querying() -> None:  # a fresh query (no cached result) every 0.2 s
        for i in itertools.count():
            query(mnt.root, f"postgres migrations {i}")
            if stop.wait(0.2):
                return

    worker = threading.Thread(target=keep_querying)
    worker.start()
    try:
        time.sleep(0.5)
        assert daemon_status(mnt)["releasing_memory"] is True
    finally:
        stop.set()
        worker.join()
    deadline = time.monotonic() + 30
    while daemon_status(mnt)["releasing_memory"]:
        assert time.monotonic() < deadline, "the release never ran"
        time.sleep(0.2)


def test_options_limit_and_prefix(mnt):
    doc = json.loads(query(mnt.root, "team notes?k=1&in=team.json"))
    assert len(doc["results"]) <= 1
    assert all(r["path"].startswith("team/") for r in doc["results"])
    scoped = json.loads(query(mnt.root, "database?in=projects%2Fweb.json"))
    assert all(r["path"].startswith("projects/web/") for r in scoped["results"])


def test_read_your_writes_renames_edits_and_shreds_at_once(mnt):
    """Issue 12's bug: a shredded memory was served from the result cache for
    seconds, path and text. The same query, asked again at once, must follow
    every change."""
    note = mnt.root / "fresh" / "auth.md"
    note.parent.mkdir()
    note.write_text("# Auth\nJWT signing keys rotate every thirty days, by the zebra team.\n")
    asked = "token key rotation policy zebra"
    assert first_path(mnt.root, asked) == "fresh/auth.md"  # at once, by its words
    os.rename(note, mnt.root / "fresh" / "renamed.md")
    assert first_path(mnt.root, asked) == "fresh/renamed.md"
    (mnt.root / "fresh" / "renamed.md").write_text("# Auth\nKeys never rotate now (zebra).\n")
    shown = query(mnt.root, asked + ".json")
    assert "thirty days" not in shown and "never rotate" in shown
    os.unlink(mnt.root / "fresh" / "renamed.md")
    assert first_path(mnt.root, asked) != "fresh/renamed.md"
    results = json.loads(query(mnt.root, asked + ".json"))["results"]
    assert not [r for r in results if r["path"].startswith("fresh/") or "zebra" in r["snippet"]]


def test_search_tree_is_read_only_and_lists_recent_queries(mnt):
    query(mnt.root, "deploy")
    assert "deploy" in os.listdir(mnt.root / "search")
    assert "search" not in os.listdir(mnt.root)  # reachable, not listed
    assert (mnt.root / "search").is_dir()
    for attempt in (
        lambda: (mnt.root / "search" / "new-file").write_text("x"),
        lambda: (mnt.root / "search" / "dir").mkdir(),
        lambda: os.unlink(mnt.root / "search" / "deploy"),
        lambda: (mnt.root / "search" / "deploy").write_bytes(b"x"),
        lambda: (mnt.root / "search").rmdir(),
    ):
        with pytest.raises(OSError) as caught:
            attempt()
        # Every name in search/ exists (it is a query), so mkdir says EEXIST.
        assert caught.value.errno in (errno.EROFS, errno.EACCES, errno.EEXIST), caught.value


def test_cli_search_goes_through_the_daemon(mnt):
    done = mnt.cli("search", "--json", "-k", "2", "ERR_CONN_RESET")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["results"][0]["location"] == f"{mnt.root}/projects/web/websocket.md"
    assert b"indexing" not in done.stderr  # answered by the daemon's index


def test_another_model_is_refused_on_the_mount_until_reindex(tmp_path):
    from memvault.vault import Vault

    from ..conftest import PASSPHRASE

    with mounted(tmp_path) as m:
        (m.root / "a.md").write_text("# Deploy\nDeploys go through make release.\n")
        m.lock()
        with Vault.open(m.vault, PASSPHRASE, compact_delay=None) as v:
            v.pin_model("f" * 64)
        assert m.unlock().returncode == 0
        assert "memvault reindex" in query(m.root, "deploy")
        assert m.cli("reindex").returncode == 0
        deadline = time.monotonic() + 60
        while first_path(m.root, f"deploy release {time.monotonic()}") != "a.md":
            assert time.monotonic() < deadline, "re-indexing never finished"
            time.sleep(0.3)


def test_a_name_that_is_no_query_is_no_file(mnt):
    for name in ("deploy?k=99", "deploy?k=abc.json", "deploy?in=a%2F..%2Fb", "%20", "x?in=search"):
        with pytest.raises(FileNotFoundError):
            (mnt.root / "search" / name).read_bytes()
    assert "deploy" in query(mnt.root, "deploy?k=2&in=%2Fprojects%2F")
