"""The mount's garbage collection at lulls (fs/collector.py), in process: the
real collector, real objects, a real trio run."""

from __future__ import annotations

import gc
import time
import weakref

import pytest
import trio

from memvault.activity import LULL_S, Activity
from memvault.fs.collector import LullCollector, collect_at_lulls


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def a_cycle() -> weakref.ref:
    """Two objects that only reach each other once the caller drops them."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture(autouse=True)
def unfrozen():
    """Nothing frozen before or after; no automatic collection meanwhile (only
    the passes under test collect)."""
    gc.unfreeze()
    gc.disable()
    yield
    gc.enable()
    gc.unfreeze()


def test_a_pass_freezes_what_survived_and_only_after_a_request():
    collector = LullCollector()
    kept = [Node() for _ in range(1000)]
    assert collector.at_lull(last_request=1.0) == "young"
    frozen = gc.get_freeze_count()
    assert frozen >= len(kept)
    assert collector.at_lull(last_request=1.0) is None  # no request since: nothing to do
    assert gc.get_freeze_count() == frozen
    assert collector.at_lull(last_request=2.0) == "young"


def test_a_young_pass_collects_cycles_not_yet_frozen():
    gone = a_cycle()
    LullCollector().at_lull(last_request=1.0)
    assert gone() is None


def test_only_a_full_pass_collects_a_cycle_dropped_after_its_freeze():
    now = [0.0]
    collector = LullCollector(full_every=60.0, clock=lambda: now[0])
    a, b = Node(), Node()
    a.other, b.other = b, a
    left = weakref.ref(a)
    collector.at_lull(last_request=1.0)  # both frozen while still in use
    del a, b  # now a cycle nobody reaches
    now[0] = 30.0
    assert collector.at_lull(last_request=2.0) == "young"
    assert left() is not None  # frozen: a young pass leaves it
    now[0] = 61.0
    assert collector.at_lull(last_request=3.0) == "full"
    assert left() is None


def test_the_task_runs_a_pass_once_the_mount_is_quiet():
    activity = Activity()
    activity.touch()

    async def main() -> None:
        with trio.move_on_after(4 * LULL_S):
            await collect_at_lulls(activity)

    start = time.monotonic()
    trio.run(main)
    assert time.monotonic() - start >= 4 * LULL_S
    assert gc.get_freeze_count() > 0
