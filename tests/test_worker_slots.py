"""How the worker of ``ai-memory serve`` shares its ``--threads`` slots
(``aimemory_site.gunicorn_worker``): which requests count as arrived whole, so the poller
queues them for a slot rather than start a thread, in what order a freed slot goes, and
which thread of the pool runs the next request.

The served behaviour (parked calls, trickling clients, many clients at once) is tested
against spawned servers in tests/test_wait_serving.py and tests/test_slow_clients.py.
"""

from __future__ import annotations

import io
import socket
import threading
import time
from types import SimpleNamespace
from typing import Any

import pytest

from aimemory_site.gunicorn_worker import (
    ARRIVED_WHOLE_PEEK_BYTES,
    _Slots,
    _ThreadPool,
    request_arrived_whole,
)

POST_HEAD = (
    b"POST /api/v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n"
)


def _conn(sock: socket.socket, held: bytes = b"") -> Any:
    """A connection as gthread has it: its socket, and its parser's read-ahead."""
    return SimpleNamespace(
        sock=sock, parser=SimpleNamespace(unreader=SimpleNamespace(buf=io.BytesIO(held)))
    )


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
        POST_HEAD % 2 + b"{}",
        b"POST /x HTTP/1.1\r\ncontent-length:  3 \r\n\r\nabc",
    ],
    ids=["no body", "body", "header spelt otherwise"],
)
def test_a_request_whose_head_and_body_arrived_is_whole(
    pair: tuple[socket.socket, socket.socket], request_bytes: bytes
) -> None:
    client, server = pair
    client.sendall(request_bytes)

    assert request_arrived_whole(_conn(server))
    assert server.recv(65536) == request_bytes  # looked at, not read


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"",
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n",
        POST_HEAD % 10 + b"{}",
        b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
        b"POST /x HTTP/1.1\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n",
    ],
    ids=["nothing yet", "head unfinished", "body short", "chunked", "awaits 100 Continue"],
)
def test_a_request_still_arriving_is_not_whole(
    pair: tuple[socket.socket, socket.socket], request_bytes: bytes
) -> None:
    client, server = pair
    if request_bytes:
        client.sendall(request_bytes)

    assert not request_arrived_whole(_conn(server))


def test_a_request_longer_than_is_looked_at_is_not_whole(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    client, server = pair
    body = b"x" * ARRIVED_WHOLE_PEEK_BYTES  # within the socket pair's buffer
    client.sendall(POST_HEAD % len(body) + body)

    assert not request_arrived_whole(_conn(server))


def test_bytes_the_parser_already_holds_make_it_not_whole(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    """A pipelined request may have begun in an earlier read: what the socket holds is
    not all of it."""
    client, server = pair
    client.sendall(b"Host: x\r\n\r\n")

    assert not request_arrived_whole(_conn(server, held=b"GET / HTTP/1.1\r\n"))


class _Dispatched(list[str]):
    """The connections ``_Slots`` handed to a thread, in order."""


@pytest.fixture
def dispatched() -> _Dispatched:
    return _Dispatched()


def test_a_request_queued_while_every_slot_is_taken_gets_the_slot_freed(
    dispatched: _Dispatched,
) -> None:
    slots = _Slots(1, dispatched.append)

    assert slots.take_or_queue("first")
    assert not slots.take_or_queue("second")
    assert not slots.take_or_queue("third")
    # The thread of "first" serves "second" itself; then one freeing the slot hands
    # "third" to a thread.
    assert slots.pass_on() == "second"
    slots.release()
    assert dispatched == ["third"]
    slots.release()
    assert slots.take_or_queue("fourth")


def test_no_request_takes_a_free_slot_ahead_of_queued_ones(dispatched: _Dispatched) -> None:
    slots = _Slots(2, dispatched.append)
    assert slots.take() and slots.take_or_queue("b")
    assert not slots.take()
    assert not slots.take_or_queue("queued")

    slots.release()

    assert dispatched == ["queued"]
    assert not slots.take()
    assert not slots.take_or_queue("late")


def test_a_thread_waiting_for_a_slot_goes_before_queued_requests(
    dispatched: _Dispatched,
) -> None:
    """A thread that waits (a parked call back to look, a request read before it had a
    slot) already holds its request; queued ones have no thread yet."""
    slots = _Slots(1, dispatched.append)
    assert slots.take_or_queue("running")
    got_slot = threading.Event()

    def parked_call_back_to_look() -> None:
        slots.acquire()
        got_slot.set()

    waiter = threading.Thread(target=parked_call_back_to_look)
    waiter.start()
    deadline = time.monotonic() + 5
    while slots._threads_waiting != 1 and time.monotonic() < deadline:
        time.sleep(0.001)  # acquire() tells no one that it waits
    assert not slots.take_or_queue("queued")

    assert slots.pass_on() is None  # the slot went to the waiting thread
    waiter.join(timeout=5)
    assert got_slot.is_set() and dispatched == []
    slots.release()
    assert dispatched == ["queued"]


def _ran_on(pool: _ThreadPool, count: int) -> list[int]:
    """The threads (idents) that ran ``count`` tasks submitted one after another, each
    once the one before had finished and its thread was idle again."""
    threads: list[int] = []

    def task(done: threading.Event) -> None:
        threads.append(threading.get_ident())
        done.set()

    for _ in range(count):
        done = threading.Event()
        pool.submit(task, done)
        assert done.wait(5)
        deadline = time.monotonic() + 5
        while len(pool._idle) != pool._threads and time.monotonic() < deadline:
            time.sleep(0.001)  # the thread is on its way back to idle
    return threads


def test_the_thread_idle_last_takes_the_next_task() -> None:
    """One client's requests, one after another, run on one thread (one database
    connection, whose page cache stays warm), however many threads the pool has."""
    pool = _ThreadPool(8)
    release, running = threading.Event(), threading.Semaphore(0)

    def busy() -> None:
        running.release()
        release.wait(5)

    for _ in range(3):  # three threads, busy at once, then idle
        pool.submit(busy)
    for _ in range(3):
        assert running.acquire(timeout=5)
    release.set()
    deadline = time.monotonic() + 5
    while len(pool._idle) < 3 and time.monotonic() < deadline:
        time.sleep(0.001)

    ran_on = _ran_on(pool, 20)

    assert pool._threads == 3
    assert len(set(ran_on)) == 1
    pool.shutdown()


def test_tasks_beyond_the_threads_wait_their_turn() -> None:
    pool = _ThreadPool(1)
    release = threading.Event()
    order: list[int] = []
    pool.submit(release.wait, 5)
    for n in range(3):
        pool.submit(order.append, n)
    assert pool._threads == 1 and order == []

    release.set()
    deadline = time.monotonic() + 5
    while len(order) < 3 and time.monotonic() < deadline:
        time.sleep(0.001)

    assert order == [0, 1, 2]
    pool.shutdown()


def test_a_shut_down_pool_ends_its_idle_threads_and_takes_no_task() -> None:
    pool = _ThreadPool(4)
    _ran_on(pool, 1)
    assert pool._threads == 1

    pool.shutdown()

    deadline = time.monotonic() + 5
    while pool._threads and time.monotonic() < deadline:
        time.sleep(0.001)
    with pytest.raises(RuntimeError):
        pool.submit(print)


def test_a_thread_gone_idle_cold_goes_below_the_warm_ones() -> None:
    """A parked call's thread let its database connection go: the next request goes to
    a thread that kept one, even if that one went idle earlier."""
    warm_threads: set[int] = set()
    pool = _ThreadPool(4, warm=lambda: threading.get_ident() in warm_threads)
    release_warm, release_cold = threading.Event(), threading.Event()
    idents: dict[str, int] = {}
    running = threading.Semaphore(0)

    def hold(name: str, until: threading.Event, warm: bool) -> None:
        idents[name] = threading.get_ident()
        if warm:
            warm_threads.add(threading.get_ident())
        running.release()
        until.wait(5)

    pool.submit(hold, "warm", release_warm, True)
    pool.submit(hold, "cold", release_cold, False)
    assert running.acquire(timeout=5) and running.acquire(timeout=5)
    release_warm.set()
    deadline = time.monotonic() + 5
    while len(pool._idle) < 1 and time.monotonic() < deadline:
        time.sleep(0.001)
    release_cold.set()  # idle last, but cold
    while len(pool._idle) < 2 and time.monotonic() < deadline:
        time.sleep(0.001)

    assert _ran_on(pool, 1) == [idents["warm"]]
    pool.shutdown()
