"""Background work waits for a lull in the mount's requests, but never forever."""

from __future__ import annotations

import threading
import time

from memvault.activity import LULL_S, Activity
from memvault.vault.housekeeping import LULL_POLL_S, Housekeeper


def test_an_untouched_mount_is_idle_at_once():
    activity = Activity()
    started = time.monotonic()
    activity.wait_for_lull(5.0, lull=0.3)
    assert time.monotonic() - started < 0.05


def test_waits_for_the_lull_after_the_last_request():
    activity = Activity()
    activity.touch()
    started = time.monotonic()
    activity.wait_for_lull(5.0, lull=0.3)
    assert 0.25 <= time.monotonic() - started < 1.0
    assert activity.idle_for() >= 0.3


def test_patience_bounds_the_wait_under_constant_load():
    activity = Activity()
    started = time.monotonic()
    while time.monotonic() - started < 0.8:  # a request every 10 ms: no lull of 0.3 s
        activity.touch()
        activity.wait_for_lull(0.0, lull=0.3)  # patience 0: returns at once
        time.sleep(0.01)
    activity.touch()
    waited = time.monotonic()
    activity.wait_for_lull(0.2, lull=10.0)
    assert 0.15 <= time.monotonic() - waited < 0.6


def test_stopping_ends_the_wait():
    activity = Activity()
    activity.touch()
    started = time.monotonic()
    activity.wait_for_lull(30.0, lull=30.0, stopping=lambda: time.monotonic() - started > 0.2)
    assert time.monotonic() - started < 1.0


def test_a_waiting_thread_wakes_about_once_a_lull_under_constant_load(monkeypatch):
    """Each wake-up of a waiting worker takes the GIL and a core from the mount:
    under a request every 5 ms it sleeps until the lull could begin (0.3 s),
    not in steps of 0.1 s."""
    from memvault import activity as module

    real_sleep = time.sleep
    sleeps: list[float] = []

    def counted(seconds: float) -> None:
        sleeps.append(seconds)
        real_sleep(seconds)

    activity = Activity()
    activity.touch()
    monkeypatch.setattr(module.time, "sleep", counted)
    worker = threading.Thread(target=activity.wait_for_lull, args=(1.0,), kwargs={"lull": 0.3})
    worker.start()
    while worker.is_alive():  # requests keep coming: the wait ends at its patience
        activity.touch()
        real_sleep(0.005)
    worker.join()
    assert 3 <= len(sleeps) <= 5, sleeps


def test_the_housekeeper_looks_again_when_the_lull_could_begin():
    activity = Activity()
    keeper = Housekeeper(lambda: None, lambda: None, None, activity)
    keeper._flush_at = time.monotonic() - 1  # due, waiting for a lull
    activity.touch()
    assert 0.25 <= keeper._wait_time() <= LULL_S
    time.sleep(0.25)
    assert keeper._wait_time() == LULL_POLL_S  # the lull is near: the shortest look


def test_the_housekeeper_says_what_is_scheduled_and_running():
    activity = Activity()
    started, release = threading.Event(), threading.Event()

    def slow_flush() -> None:
        started.set()
        release.wait(5)

    keeper = Housekeeper(slow_flush, lambda: None, 60.0, activity)
    assert keeper.scheduled() == []
    keeper.committed(100, owes_compaction=True)  # a flush within FLUSH_DELAY, a compaction later
    assert keeper.scheduled() == ["flush", "compaction"]
    assert started.wait(5), "the flush never ran"
    assert keeper.scheduled() == ["flush", "compaction"], "a running flush is still work"
    release.set()
    deadline = time.monotonic() + 5
    while keeper.scheduled() != ["compaction"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert keeper.scheduled() == ["compaction"]
    keeper.stop()
