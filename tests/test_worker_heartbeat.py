"""``ai-memory serve``'s gunicorn worker beats its heartbeat at most once a second
however many requests pass (``aimemory_site.gunicorn_worker.ThreadWorker.notify``):
the master reads only the heartbeat file's age, and each beat costs a system call."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from gunicorn.config import Config

from aimemory_site.gunicorn_worker import HEARTBEAT_EVERY_SECONDS, ThreadWorker


@pytest.fixture
def worker() -> Iterator[ThreadWorker]:
    made = ThreadWorker(1, 1, [], None, 15, Config(), None)
    yield made
    made.tmp.close()


def test_a_hundred_turns_of_the_loop_beat_once(worker: ThreadWorker) -> None:
    worker.notify()
    first = worker.tmp.last_update()
    for _ in range(100):
        worker.notify()
    assert worker.tmp.last_update() == first


def test_a_second_later_it_beats_again(worker: ThreadWorker) -> None:
    worker.notify()
    first = worker.tmp.last_update()
    worker._beat_at = time.monotonic() - HEARTBEAT_EVERY_SECONDS
    worker.notify()
    assert worker.tmp.last_update() > first


def test_a_short_timeout_beats_twice_within_it(worker: ThreadWorker) -> None:
    # A master told --timeout 1 must see a beat well inside each second.
    worker.timeout = 1
    worker.notify()
    first = worker.tmp.last_update()
    worker._beat_at = time.monotonic() - 0.5
    worker.notify()
    assert worker.tmp.last_update() > first
