"""How pyfuse3's reader tasks take turns waiting on /dev/fuse.

pyfuse3 keeps several tasks that each read a request and run its handler;
one at a time waits on the device, under a trio.Lock. That lock is handed to
the next task as soon as a request is read, so every request costs a second
task's wakeup, its steps through trio's scheduler and the lock's parking
lot, although almost every handler here finishes without suspending and its
task could simply wait for the next request itself: more than a quarter of
the bare binding's CPU per request (2,000 small files created: 1.02 s of the
daemon's CPU against 0.73 s, same run).

``TakeTurns`` is handed over only when it has to: a task that releases it and
takes it back within the same step keeps it, and only when its owner
suspended without it (a handler waiting on a thread: a query, a slow fsync)
does the next reader get it, at the end of that step, so requests keep being
read meanwhile. ``install`` gives pyfuse3 this lock through the module
attribute its own asyncio layer replaces (``pyfuse3.trio``); everything else
pyfuse3 takes from trio is trio's, but for ``wait_readable``: through a
``DeviceWatch``, a reader reads a request that is already queued, or queued
within a few tens of µs, without a sleep in trio's epoll and the wakeup after.
"""

from __future__ import annotations

import collections
import os
import select
import time
import types
from collections.abc import Callable

import pyfuse3
import trio
from trio import lowlevel


class TakeTurns:
    """A lock whose release hands it over lazily (see the module docstring).

    Not reentrant; it is not a general trio lock: taking it free is no
    checkpoint (pyfuse3's next await, on the device, is one).
    """

    def __init__(self) -> None:
        self.owner: lowlevel.Task | None = None
        self.waiting: collections.deque[lowlevel.Task] = collections.deque()
        self.handovers = 0  # how often the next task had to take over (tests)
        self._run: lowlevel.TrioToken | None = None  # the trio run its hook is in

    async def __aenter__(self) -> None:
        task = lowlevel.current_task()
        run = lowlevel.current_trio_token()
        if run is not self._run:  # the hook lives in one trio run: added at first use
            lowlevel.add_instrument(_HandOver(self))
            self._run = run
        if self.owner is None:
            self.owner = task
            return
        self.waiting.append(task)

        def abort(_) -> lowlevel.Abort:
            self.waiting.remove(task)  # still waiting: a task handed the lock is rescheduled
            return lowlevel.Abort.SUCCEEDED

        await lowlevel.wait_task_rescheduled(abort)  # the lock is ours when woken

    async def __aexit__(self, *exc_info) -> None:
        self.owner = None

    def hand_over(self) -> None:
        """At the end of a task's step: a lock left free goes to the next task."""
        if self.owner is None and self.waiting:
            self.owner = self.waiting.popleft()
            self.handovers += 1
            lowlevel.reschedule(self.owner)


class _HandOver(trio.abc.Instrument):
    def __init__(self, lock: TakeTurns) -> None:
        self.lock = lock

    def after_task_step(self, task: lowlevel.Task) -> None:
        self.lock.hand_over()


SPIN_S = 30e-6
"""How long a reader watches the device for the next request before it sleeps. A
serial caller (a tool writing one file after another) sends its next request
within tens of µs of our reply; reading it then saves the sleep in epoll and
the wakeup (a context switch each way, and a round through trio's scheduler):
up to a third of the time of 2,000 small files created, here. The watch
yields the CPU between asks: a caller on the same CPU (the scheduler's
choice when the other is busy) runs at once, not when it preempts the
watch, and sends its next request meanwhile; with the CPU to itself the
watch's yield returns at once. 2,000 files created, same run, the caller
and the daemon on one CPU: 871 against 1,029 ms spinning without yielding;
placement free: 958 against 1,041 ms."""

CHECKPOINT_EVERY = 64
"""Requests read at once in a row, at most: then a reader waits through trio (a
checkpoint), so the run's other tasks (the control socket, threads' results)
get their turn during a long burst."""


class DeviceWatch:
    """``wait_readable`` for pyfuse3's readers: a request already queued, or queued
    within ``spin_s``, is read at once, without trio; otherwise trio waits.

    The watch asks with poll(2) and a timeout of 0, yielding the CPU between
    asks, so a reader never sleeps in the kernel while it watches; an idle
    mount spends nothing: the watch starts only after a request.
    """

    def __init__(self, spin_s: float = SPIN_S) -> None:
        self.spin_s = spin_s
        self.at_once = 0  # requests read without trio (tests)
        self.waited = 0  # and through it
        self._in_a_row = 0
        self._device: object = None
        self._poll = select.poll()
        self.after_reply: Callable[[], None] | None = None
        """Work the handlers left for after their reply (vault/later.py): run when a
        reader comes back to the device, before it looks for the next request."""

    async def wait_readable(self, device) -> None:
        if device != self._device:  # the session's fd: the same at every call
            self._poll = select.poll()
            self._poll.register(device, select.POLLIN)
            self._device = device
        if self.after_reply is not None:
            self.after_reply()
        if self._in_a_row < CHECKPOINT_EVERY and self._queued():
            self._in_a_row += 1
            self.at_once += 1
            return
        self._in_a_row = 0
        self.waited += 1
        await lowlevel.wait_readable(device)

    def _queued(self) -> bool:
        """Whether a request is queued now or within spin_s (errors: not queued, so
        that trio's wait reports them)."""
        poll = self._poll.poll
        deadline = time.perf_counter() + self.spin_s
        while True:
            ready = poll(0)
            if ready:
                return ready[0][1] == select.POLLIN
            if time.perf_counter() >= deadline:
                return False
            os.sched_yield()


class _Lowlevel(types.ModuleType):
    """trio.lowlevel as pyfuse3 sees it: its readers wait on the device through a
    DeviceWatch."""

    def __init__(self) -> None:
        super().__init__("trio.lowlevel")
        self.watch = DeviceWatch()
        self.wait_readable = self.watch.wait_readable

    def __getattr__(self, name: str):
        return getattr(lowlevel, name)


class _Trio(types.ModuleType):
    """trio as pyfuse3 sees it: its reader lock is a TakeTurns."""

    Lock = TakeTurns

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.lowlevel = _Lowlevel()

    def __getattr__(self, name: str):
        return getattr(trio, name)


def install(after_reply: Callable[[], None] | None = None) -> bool:
    """Give pyfuse3's reader tasks a TakeTurns lock and a DeviceWatch that runs
    ``after_reply`` (before pyfuse3.main). False if this pyfuse3 does not take
    trio from where its asyncio layer puts it: then its own lock and wait stay,
    slower and just as correct (the work left for later then waits for the
    next request)."""
    if getattr(pyfuse3, "trio", None) is trio:
        pyfuse3.trio = _Trio("trio")
    installed = getattr(pyfuse3, "trio", None)
    if not isinstance(installed, _Trio):
        return False
    installed.lowlevel.watch.after_reply = after_reply
    return True
