"""The bookkeeping a mount's change leaves for after its reply (vault/later.py):
never seen half done, by any thread, and attributed to whoever made the change."""

from __future__ import annotations

import logging
import threading

from memvault.vault.audit import Caller, current_caller
from memvault.vault.later import LaterLock
from memvault.vault.records import FILE

from ..conftest import reopen
from .test_short_paths import journal_vault


def test_work_left_for_later_runs_before_anyone_else_holds_the_lock():
    lock, ran = LaterLock(), []
    lock.later.append(lambda: ran.append("bookkeeping"))
    seen = []

    def other_thread():
        with lock:
            seen.append(list(ran))

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join(5)
    assert seen == [["bookkeeping"]] and not lock.later


def test_a_failing_piece_is_logged_the_rest_runs_and_the_lock_is_released(caplog):
    lock, ran = LaterLock(), []

    def fails():
        raise KeyError("secret-name.md")

    lock.later.extend([fails, lambda: ran.append("after")])
    with caplog.at_level(logging.ERROR, logger="memvault"), lock:
        pass
    assert ran == ["after"] and "bookkeeping after a change failed" in caplog.text
    taken = threading.Thread(target=lambda: lock.__enter__() and lock.__exit__())
    taken.start()
    taken.join(5)
    assert not taken.is_alive(), "the lock was left held"


def test_a_new_file_and_its_first_write_are_whole_for_another_thread(vault_path):
    with journal_vault(vault_path) as vault:
        vault.put("first.md", b"drops the stored snapshot: the short paths follow")
        rid, _ = vault.create_in(None, "new.md", FILE, mode=0o640, opened=True)
        assert vault._lock.later, "the create left its staging for later"
        seen = {}
        reader = threading.Thread(target=lambda: seen.update(ls=vault.listdir(None)))
        reader.start()
        reader.join(5)
        assert [name for name, _, _ in seen["ls"]] == ["first.md", "new.md"]
        vault.write_chunks(rid, {0: b"its first version"}, 17)
        assert vault._lock.later, "the write left its bookkeeping for later"
        reader = threading.Thread(target=lambda: seen.update(meta=vault.by_record_id(rid)))
        reader.start()
        reader.join(5)
        assert seen["meta"].size == 17 and not vault._lock.later
    with reopen(vault_path, verify_every_record=True) as again:  # the integrity sum holds
        assert again.get("new.md") == b"its first version"


def test_the_trail_names_who_made_the_change_not_who_finished_its_bookkeeping(vault_path):
    writer, other = Caller("fs", pid=101, comm="editor"), Caller("fs", pid=202, comm="reader")
    with journal_vault(vault_path) as vault:
        vault.put("first.md", b"drops the stored snapshot: the short paths follow")
        token = current_caller.set(writer)
        try:
            created, _ = vault.create_in(None, "created.md", FILE, mode=0o600, opened=True)
        finally:
            current_caller.reset(token)
        token = current_caller.set(other)
        try:
            vault.store_new_files()  # the close, in another process's request
        finally:
            current_caller.reset(token)
        token = current_caller.set(writer)
        try:
            rid, _ = vault.create_in(None, "written.md", FILE, mode=0o600, opened=True)
            vault.write_chunks(rid, {0: b"content"}, 7)
        finally:
            current_caller.reset(token)
        token = current_caller.set(other)
        try:
            vault.by_record_id(rid)  # the next request finishes the write's bookkeeping
        finally:
            current_caller.reset(token)
        events = {(e.path, e.op): e.caller.pid for e in vault.audit_trail()}
        assert events[("created.md", "create")] == 101
        assert events[("written.md", "create")] == 101
