"""The in-process wake registry: subscribe, publish, park, shut down."""

from __future__ import annotations

import threading

import pytest

from aimemory_site.lib import wakeups

pytestmark = pytest.mark.usefixtures("wakeups_alone")


def _park_in_thread(
    topics: list[str], wait_seconds: float, answers: list[object]
) -> tuple[threading.Thread, list[object]]:
    """Start a wait whose look answers from ``answers`` (None until one is appended)."""
    looks = threading.Event()
    result: list[object] = []

    def look() -> object | None:
        looks.set()
        return answers[-1] if answers else None

    thread = threading.Thread(
        target=lambda: result.append(
            wakeups.wait_for(look, topics=topics, wait_seconds=wait_seconds)
        )
    )
    thread.start()
    assert looks.wait(5)
    return thread, result


def test_a_publication_on_its_topic_wakes_a_parked_call() -> None:
    answers: list[object] = []
    thread, result = _park_in_thread([wakeups.inbox_topic(1)], 30, answers)
    answers.append("claimed")
    wakeups.wake_publish([wakeups.inbox_topic(1)])
    thread.join(5)
    assert result == ["claimed"]


def test_a_publication_on_another_topic_leaves_it_parked() -> None:
    answers: list[object] = []
    thread, result = _park_in_thread([wakeups.inbox_topic(1)], 0.3, answers)
    answers.append("not for you")
    assert wakeups.wake_deliver([wakeups.inbox_topic(2)]) == 0
    thread.join(5)
    assert result == [None]


def test_a_wait_that_finds_something_at_once_does_not_park() -> None:
    assert wakeups.wait_for(lambda: "here", topics=["t"], wait_seconds=60) == "here"
    assert wakeups.parked_count() == 0


def test_shutdown_answers_parked_calls_and_later_waits_at_once() -> None:
    thread, result = _park_in_thread(["t"], 60, [])
    wakeups.wake_shutdown()
    thread.join(5)
    assert result == [None]
    assert wakeups.wait_for(lambda: None, topics=["t"], wait_seconds=60) is None


def test_a_gone_client_ends_the_wait_without_another_look() -> None:
    looks = 0

    def look() -> None:
        nonlocal looks
        looks += 1

    def gone() -> bool:
        return True

    wakeups.wait_for(look, topics=["t"], wait_seconds=60, client_gone=gone)
    assert looks == 1


def test_the_transport_carries_each_publication() -> None:
    carried: list[frozenset[str]] = []
    wakeups.transport_set(carried.append)
    wakeups.wake_publish(["a", "b"])
    wakeups.wake_publish([])
    assert carried == [frozenset({"a", "b"})]


def test_the_transport_listens_before_the_first_look() -> None:
    """Else a publication between the look and the transport's start would be missed."""
    order: list[str] = []
    wakeups.transport_set(lambda topics: None, listen=lambda topics: order.append("listen"))

    def look() -> str:
        order.append("look")
        return "found"

    wakeups.wait_for(look, topics=["t"], wait_seconds=1)

    assert order == ["listen", "look"]


def test_wake_all_sends_every_parked_call_back_to_look() -> None:
    answers: list[object] = []
    parked = [_park_in_thread([f"t{n}"], 30, answers) for n in range(3)]
    answers.append("looked again")

    assert wakeups.wake_all() == 3

    for thread, result in parked:
        thread.join(5)
        assert result == ["looked again"]


def test_asking_after_the_client_takes_no_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """A parked call asks after its client every CLIENT_CHECK_SECONDS without taking its
    slot back: it gives the slot back once when it parks and takes it once to look."""
    monkeypatch.setattr(wakeups, "CLIENT_CHECK_SECONDS", 0.01)
    turns: list[str] = []
    asked = threading.Semaphore(0)

    def client_gone() -> bool:
        asked.release()
        return False

    looks: list[object] = []

    def look() -> object | None:
        looks.append("look")
        return "found" if len(looks) > 1 else None

    def wait() -> object | None:
        with wakeups.parking_hooks(lambda: turns.append("release"), lambda: turns.append("take")):
            return wakeups.wait_for(
                look, topics=["inbox:t"], wait_seconds=20, client_gone=client_gone
            )

    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(wait()))
    thread.start()
    for _ in range(5):  # the client is asked again and again while it stays parked
        assert asked.acquire(timeout=5)
    wakeups.wake_publish(["inbox:t"])
    thread.join(5)

    assert result == ["found"]
    assert turns == ["release", "take"]
