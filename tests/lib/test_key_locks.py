"""A lock named by a key, across connections, on either database: one holder at a time,
a timeout that says so, and a holder that raises lets go."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from django.db import connection

from aimemory_site.lib.key_locks import KeyLockTimeout, key_lock

pytestmark = pytest.mark.django_db(transaction=True)


def _holder(key: str, taken: threading.Event, let_go: threading.Event) -> threading.Thread:
    """A thread with its own connection that takes ``key``, says so, and holds it until
    ``let_go`` is set."""

    def hold() -> None:
        try:
            with key_lock(key, timeout=5):
                taken.set()
                let_go.wait(timeout=10)
        finally:
            connection.close()

    thread = threading.Thread(target=hold)
    thread.start()
    assert taken.wait(timeout=10)
    return thread


def test_a_held_key_times_another_caller_out_and_is_free_once_let_go() -> None:
    taken, let_go = threading.Event(), threading.Event()
    holder = _holder("question-1", taken, let_go)
    try:
        with pytest.raises(KeyLockTimeout), key_lock("question-1", timeout=0.2):
            pytest.fail("the lock was held by the other thread")
    finally:
        let_go.set()
        holder.join(timeout=10)
    with key_lock("question-1", timeout=1):
        pass


def test_a_waiter_takes_the_key_as_soon_as_the_holder_lets_go() -> None:
    taken, let_go = threading.Event(), threading.Event()
    order: list[str] = []
    holder = _holder("question-2", taken, let_go)

    def release() -> None:
        order.append("let go")
        let_go.set()

    timer = threading.Timer(0.2, release)
    timer.start()
    with key_lock("question-2", timeout=5):
        order.append("taken")
    holder.join(timeout=10)
    timer.join()
    assert order == ["let go", "taken"]


def test_a_block_that_raises_lets_go() -> None:
    with pytest.raises(RuntimeError), key_lock("question-3", timeout=1):
        raise RuntimeError("the send failed")
    done: list[bool] = []
    _in_other_thread(lambda: done.append(_taken_at_once("question-3")))
    assert done == [True]


def _taken_at_once(key: str) -> bool:
    with key_lock(key, timeout=0.5):
        return True


def _in_other_thread(work: Callable[[], object]) -> None:
    def run() -> None:
        try:
            work()
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=10)


@pytest.mark.skipif("connection.vendor != 'postgresql'")
def test_on_postgresql_keys_are_held_apart() -> None:
    taken, let_go = threading.Event(), threading.Event()
    holder = _holder("question-4", taken, let_go)
    try:
        with key_lock("question-5", timeout=0.2):
            pass
    finally:
        let_go.set()
        holder.join(timeout=10)
