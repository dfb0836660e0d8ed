"""Background work waits for a lull in the mount's requests, but never forever."""

from __future__ import annotations

import time

from memvault.activity import Activity


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
