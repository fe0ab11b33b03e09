"""The line a process's SQLite writers wait in before the writer lock
(``aimemory_site.backends.sqlite3.base.Line``): taken in the order it was asked for, so
a caller that asks just as it is let go of cannot pass one that has waited."""

from __future__ import annotations

import threading
import time

from aimemory_site.backends.sqlite3.base import Line


def _waiting_for(line: Line, count: int) -> None:
    """Return once ``count`` callers wait in ``line``."""
    deadline = time.monotonic() + 5
    while line.waiting < count:
        assert time.monotonic() < deadline, f"{line.waiting} of {count} callers wait"
        time.sleep(0.001)


def _take_in_thread(line: Line, order: list[str], name: str) -> threading.Thread:
    def take() -> None:
        assert line.acquire(timeout=5)
        order.append(name)
        line.release()

    thread = threading.Thread(target=take)
    thread.start()
    return thread


def test_a_line_let_go_of_goes_to_the_caller_waiting_not_to_a_newcomer() -> None:
    line = Line()
    line.acquire()
    order: list[str] = []
    waiter = _take_in_thread(line, order, "waiter")
    _waiting_for(line, 1)

    line.release()
    newcomer_took_it = line.acquire(blocking=False)
    waiter.join(5)

    assert not newcomer_took_it
    assert order == ["waiter"]
    assert line.acquire(blocking=False)  # let go of by the waiter: free again


def test_callers_take_the_line_in_the_order_they_asked() -> None:
    line = Line()
    line.acquire()
    order: list[str] = []
    threads = []
    for n in range(5):
        threads.append(_take_in_thread(line, order, f"caller-{n}"))
        _waiting_for(line, n + 1)

    line.release()
    for thread in threads:
        thread.join(5)

    assert order == [f"caller-{n}" for n in range(5)]


def test_a_caller_whose_wait_times_out_leaves_the_line() -> None:
    line = Line()
    line.acquire()

    assert not line.acquire(timeout=0.05)
    assert line.waiting == 0
    line.release()
    assert line.acquire(blocking=False)


def test_a_held_line_refuses_a_caller_that_will_not_wait() -> None:
    line = Line()
    with line:
        assert not line.acquire(blocking=False)
    assert line.acquire(blocking=False)
