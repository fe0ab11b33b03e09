"""``ai-memory serve``'s gunicorn worker beats its heartbeat at most once a second
however many requests pass (``aimemory_site.gunicorn_worker.ThreadWorker.notify``):
the master reads only the heartbeat file's age, and each beat costs a system call.

The worker's clock is a fake one the tests move, so a slow machine cannot add a beat."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from gunicorn.config import Config

from aimemory_site import gunicorn_worker
from aimemory_site.gunicorn_worker import HEARTBEAT_EVERY_SECONDS, ThreadWorker


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(gunicorn_worker, "monotonic", fake)
    return fake


@pytest.fixture
def worker() -> Iterator[ThreadWorker]:
    made = ThreadWorker(1, 1, [], None, 15, Config(), None)
    yield made
    made.tmp.close()


def test_a_hundred_turns_of_the_loop_beat_once(worker: ThreadWorker, clock: _Clock) -> None:
    worker.notify()
    first = worker.tmp.last_update()
    for _ in range(100):
        clock.now += HEARTBEAT_EVERY_SECONDS / 200
        worker.notify()
    assert worker.tmp.last_update() == first


def test_a_second_later_it_beats_again(worker: ThreadWorker, clock: _Clock) -> None:
    worker.notify()
    first = worker.tmp.last_update()
    clock.now += HEARTBEAT_EVERY_SECONDS
    worker.notify()
    assert worker.tmp.last_update() > first


def test_a_short_timeout_beats_twice_within_it(worker: ThreadWorker, clock: _Clock) -> None:
    # A master told --timeout 1 must see a beat well inside each second.
    worker.timeout = 1
    worker.notify()
    first = worker.tmp.last_update()
    clock.now += 0.5
    worker.notify()
    assert worker.tmp.last_update() > first
