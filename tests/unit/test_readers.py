"""TakeTurns under the loop pyfuse3 runs (internal.pxi: several reader tasks,
one at a time waiting on the device under the lock, each then handling what
it read), and DeviceWatch, the wait on the device, with a socket for the
device: a real trio run, no FUSE."""

from __future__ import annotations

import socket
import threading

import pytest
import trio
import trio.testing

from memvault.fs.readers import CHECKPOINT_EVERY, DeviceWatch, TakeTurns

READERS = 4


async def serve(device: socket.socket, handle, lock: TakeTurns) -> list[str]:
    """Reader tasks as pyfuse3 runs them; returns who served each request."""
    served: list[str] = []

    async def reader(name: str) -> None:
        while True:
            async with lock:
                await trio.lowlevel.wait_readable(device)
            request = device.recv(1)
            if request == b"q":
                return
            served.append(name)
            await handle(request)

    async with trio.open_nursery() as nursery:
        for i in range(READERS):
            nursery.start_soon(reader, f"reader-{i}")
    return served


def test_a_reader_whose_handler_finishes_keeps_the_lock_and_reads_the_next_request():
    lock = TakeTurns()

    async def handle(request: bytes) -> None:
        pass  # no suspension, like almost every handler

    async def main() -> list[str]:
        device, client = socket.socketpair()
        with device, client, trio.fail_after(10):
            device.setblocking(False)
            async with trio.open_nursery() as nursery:
                result: list[list[str]] = []

                async def run() -> None:
                    result.append(await serve(device, handle, lock))

                nursery.start_soon(run)
                for _ in range(100):
                    client.send(b"s")
                    await trio.sleep(0.001)  # one request at a time, as a serial caller
                client.send(b"q" * READERS)
            return result[0]

    served = trio.run(main)
    assert len(served) == 100
    assert len(set(served)) == 1  # one task read them all
    assert lock.handovers <= READERS  # only the readers' end passes it on


def test_a_suspended_handler_hands_the_lock_over_so_requests_keep_being_read():
    """Request 'w' waits until request 'r' is handled: with nobody waiting on the
    device while 'w' waits, 'r' would never be read."""
    lock = TakeTurns()
    released = trio.Event()

    async def handle(request: bytes) -> None:
        if request == b"w":
            await released.wait()
        elif request == b"r":
            released.set()

    async def main() -> list[str]:
        device, client = socket.socketpair()
        with device, client:
            device.setblocking(False)
            result: list[list[str]] = []
            async with trio.open_nursery() as nursery:

                async def run() -> None:
                    result.append(await serve(device, handle, lock))

                nursery.start_soon(run)
                client.send(b"w")
                await trio.sleep(0.05)
                client.send(b"r")
                with trio.fail_after(5):
                    await released.wait()
                client.send(b"q" * READERS)
            return result[0]

    served = trio.run(main)
    assert len(served) == 2 and served[0] != served[1]
    assert lock.handovers >= 1


def test_a_task_cancelled_while_waiting_for_the_lock_leaves_the_queue():
    lock = TakeTurns()

    async def waiter_cancelled() -> None:
        holder_done = trio.Event()

        async def hold() -> None:
            async with lock:
                await holder_done.wait()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(hold)
            await trio.testing.wait_all_tasks_blocked()
            with trio.move_on_after(0.05):
                async with lock:
                    raise AssertionError("taken while held")
            assert not lock.waiting
            holder_done.set()
        async with lock:  # free again, and taken at once
            assert lock.owner is trio.lowlevel.current_task()

    trio.run(waiter_cancelled)


# -- DeviceWatch: a request queued, or queued within the spin, is read at once ----


def run_on_device(body) -> None:
    """Run ``await body(device, client)`` in a trio run, the device a non-blocking
    socket the client end writes requests to."""

    async def main() -> None:
        device, client = socket.socketpair()
        with device, client, trio.fail_after(10):
            device.setblocking(False)
            await body(device, client)

    trio.run(main)


def later(nursery: trio.Nursery, fn, *args) -> None:
    """Call ``fn(*args)`` 50 ms from now, in a task that runs only if the reader yields."""

    async def call() -> None:
        await trio.sleep(0.05)
        fn(*args)

    nursery.start_soon(call)


def test_requests_already_queued_are_read_without_a_checkpoint_then_trio_gets_a_turn():
    watch = DeviceWatch(spin_s=0)
    total = CHECKPOINT_EVERY * 20
    seen: list[int] = []  # how many requests were read whenever another task ran

    async def body(device, client) -> None:
        client.send(b"r" * total)
        read = 0

        async def other_task() -> None:
            while read < total:  # runnable at every step: it runs whenever trio may
                seen.append(read)
                await trio.sleep(0)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(other_task)
            for _ in range(total):
                await watch.wait_readable(device)
                assert device.recv(1) == b"r"
                read += 1

    run_on_device(body)
    # a checkpoint after every CHECKPOINT_EVERY read at once, and the other task
    # never in between (trio picks which of the two runnable tasks goes first:
    # in 19 checkpoints, it ran)
    every = CHECKPOINT_EVERY + 1
    assert all(n % every == CHECKPOINT_EVERY for n in seen if n not in (0, total))
    assert min(seen, default=total) < total
    assert watch.waited == total // every and watch.at_once == total - watch.waited


def test_a_request_sent_within_the_spin_is_read_at_once_and_none_sleeps_in_trio():
    watch = DeviceWatch(spin_s=5.0)

    async def body(device, client) -> None:
        sender = threading.Timer(0.05, client.send, (b"r",))
        sender.start()
        try:
            await watch.wait_readable(device)  # spins: the sender is another thread
        finally:
            sender.join()
        assert device.recv(1) == b"r"

    run_on_device(body)
    assert (watch.at_once, watch.waited) == (1, 0)


def test_with_nothing_queued_a_reader_waits_in_trio_and_other_tasks_run():
    watch = DeviceWatch(spin_s=0.001)

    async def body(device, client) -> None:
        async with trio.open_nursery() as nursery:
            later(nursery, client.send, b"r")
            await watch.wait_readable(device)
        assert device.recv(1) == b"r"

    run_on_device(body)
    assert (watch.at_once, watch.waited) == (0, 1)


def test_a_device_closed_while_a_reader_waits_raises_as_trio_does():
    watch = DeviceWatch(spin_s=0)

    async def body(device, client) -> None:
        async with trio.open_nursery() as nursery:
            later(nursery, trio.lowlevel.notify_closing, device)
            with pytest.raises(trio.ClosedResourceError):
                await watch.wait_readable(device)

    run_on_device(body)


def test_the_work_left_for_after_a_reply_runs_before_the_reader_looks_again():
    """vault/later.py: a reader back at the device (its reply sent) runs it first,
    whether the next request is already queued or not yet sent."""
    watch = DeviceWatch(spin_s=0.001)
    ran: list[int] = []  # how many requests had been read when it ran
    read = 0
    watch.after_reply = lambda: ran.append(read)

    async def body(device, client) -> None:
        nonlocal read
        client.send(b"r")  # queued already
        await watch.wait_readable(device)
        read += device.recv(1) == b"r"
        async with trio.open_nursery() as nursery:
            later(nursery, client.send, b"r")  # not sent yet: the reader waits in trio
            await watch.wait_readable(device)
        read += device.recv(1) == b"r"

    run_on_device(body)
    assert ran == [0, 1] and read == 2
