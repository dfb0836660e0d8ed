"""The control channel in process: a real ControlServer in a trio loop on a
real Unix socket, asked by the real client from another thread (no mount)."""

from __future__ import annotations

import os
import socket
import stat
import threading
from pathlib import Path

import pytest
import trio

from memvault.errors import EXIT_DAMAGED, EXIT_USAGE, DaemonFailed, VaultTampered
from memvault.fs import control
from memvault.fs.control_server import ControlServer


def serve_in_thread(path: Path, handlers: dict) -> tuple[threading.Thread, list]:
    """Run a ControlServer until the handler named ``stop`` is asked."""
    ready = threading.Event()
    failures: list[BaseException] = []

    async def main() -> None:
        server = ControlServer(path, handlers, path.with_suffix(".log"))

        async def stop(request):
            server.stop()
            return {"stopped": True}

        handlers["stop"] = stop
        async with trio.open_nursery() as nursery:
            await nursery.start(server.serve)
            ready.set()

    def run() -> None:
        try:
            trio.run(main)
        except BaseException as exc:  # reported by the test, not lost in the thread
            failures.append(exc)
            ready.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10), "the control server did not start"
    return thread, failures


@pytest.fixture
def server(tmp_path):
    async def echo(request):
        return {"echo": request.get("word")}

    async def tampered(request):
        raise VaultTampered("/v", "the records do not add up")

    async def bug(request):
        raise KeyError("secret-name.md")

    async def slow(request):
        await trio.sleep(0.5)
        return {"slept": True}

    path = tmp_path / "ctl.sock"
    handlers = {"echo": echo, "tampered": tampered, "bug": bug, "slow": slow}
    thread, failures = serve_in_thread(path, handlers)
    try:
        yield path
    finally:
        if path.exists():
            control.ask(path, "stop", pid=0)
        thread.join(10)
        assert not failures, failures


def test_an_answer_is_the_result_and_the_socket_is_the_owners_only(server):
    assert control.ask(server, "echo", pid=1, word="hello") == {"echo": "hello"}
    assert stat.S_IMODE(os.stat(server).st_mode) == 0o600


def test_an_error_in_the_daemon_arrives_as_its_sentence_and_exit_status(server):
    with pytest.raises(DaemonFailed) as caught:
        control.ask(server, "tampered", pid=1)
    sentence = "The vault /v failed its integrity check: the records do not add up."
    assert str(caught.value) == sentence
    assert caught.value.exit_code == EXIT_DAMAGED


def test_a_bug_in_the_daemon_is_named_by_type_not_by_message(server):
    with pytest.raises(DaemonFailed) as caught:
        control.ask(server, "bug", pid=1)
    assert "KeyError" in str(caught.value) and "secret-name" not in str(caught.value)


def test_unknown_requests_and_garbage_are_usage_errors(server):
    with pytest.raises(DaemonFailed) as caught:
        control.ask(server, "format-disk", pid=1)
    assert caught.value.exit_code == EXIT_USAGE and "format-disk" in str(caught.value)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.connect(str(server))
        raw.sendall(b"[1, 2, 3]\n")
        raw.shutdown(socket.SHUT_WR)
        reply = control.decode(raw.recv(65536))
    assert reply["ok"] is False and reply["exit_code"] == EXIT_USAGE


def test_requests_are_answered_concurrently(server):
    answers = []
    slow = threading.Thread(target=lambda: answers.append(control.ask(server, "slow", pid=1)))
    slow.start()
    assert control.ask(server, "echo", pid=1, word="meanwhile") == {"echo": "meanwhile"}
    assert not answers, "the quick answer came before the slow one finished"
    slow.join(10)
    assert answers == [{"slept": True}]


def test_no_daemon_is_a_clear_error(tmp_path):
    with pytest.raises(control.DaemonUnreachable) as caught:
        control.ask(tmp_path / "none.sock", "status", pid=42)
    assert "pid 42" in str(caught.value)


def test_a_socket_path_longer_than_sun_path_works(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    path = deep / "ctl.sock"
    assert len(os.fsencode(path)) > 108

    async def echo(request):
        return {"ok": "long"}

    thread, failures = serve_in_thread(path, {"echo": echo})
    try:
        assert control.ask(path, "echo", pid=1) == {"ok": "long"}
    finally:
        control.ask(path, "stop", pid=1)
        thread.join(10)
    assert not failures and not path.exists()
