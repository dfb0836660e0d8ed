"""Giving memory back: the debounced release runs once a burst has paused."""

from __future__ import annotations

import threading
import time

from memvault import heap


def test_debounced_runs_once_after_a_burst_has_paused() -> None:
    runs: list[float] = []
    done = threading.Event()
    job = heap.Debounced(0.2, lambda: (runs.append(time.monotonic()), done.set()))
    try:
        started = time.monotonic()
        for _ in range(5):  # a burst: each poke pushes the run back
            job.poke()
            last_poke = time.monotonic()
            time.sleep(0.05)
        assert done.wait(5)
        time.sleep(0.3)  # no second run without a new poke
        assert len(runs) == 1
        assert runs[0] - last_poke >= 0.19
        assert runs[0] - started >= 0.4
        done.clear()
        job.poke()  # a later burst runs it again
        assert done.wait(5)
        assert len(runs) == 2
    finally:
        job.stop()


def test_pending_from_the_poke_until_the_run_has_finished() -> None:
    entered, release = threading.Event(), threading.Event()
    job = heap.Debounced(0.05, lambda: (entered.set(), release.wait(5)))
    try:
        assert not job.pending
        job.poke()
        assert job.pending  # due, not run yet
        assert entered.wait(5)
        assert job.pending  # running
        release.set()
        deadline = time.monotonic() + 5
        while job.pending:
            assert time.monotonic() < deadline
            time.sleep(0.01)
    finally:
        release.set()
        job.stop()


def test_stop_cancels_a_pending_run_and_later_pokes() -> None:
    runs: list[int] = []
    job = heap.Debounced(0.1, lambda: runs.append(1))
    job.poke()
    job.stop()
    job.poke()
    time.sleep(0.3)
    assert runs == []


def test_stop_waits_for_a_run_in_progress() -> None:
    entered, finished = threading.Event(), threading.Event()

    def slow() -> None:
        entered.set()
        time.sleep(0.3)
        finished.set()

    job = heap.Debounced(0.01, slow)
    job.poke()
    assert entered.wait(5)
    job.stop()
    assert finished.is_set()


def test_trim_and_drop_mapped_keep_data_intact(tmp_path) -> None:
    """Both only give pages back: what was allocated or mapped reads the same after."""
    import mmap

    path = tmp_path / "file"
    path.write_bytes(bytes(range(256)) * 4096)
    kept = [bytes([i]) * 1000 for i in range(256)]
    garbage = [bytearray(5000) for _ in range(2000)]
    del garbage
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        before = mapped[:]
        heap.trim()
        heap.drop_mapped(path)
        assert mapped[:] == before
    assert kept == [bytes([i]) * 1000 for i in range(256)]
