"""The in-process wake registry: subscribe, publish, park, shut down; one claimer woken
per publication; the caps; the caller's right decided again after every park."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from aimemory_site.lib import wait_caps, wakeups
from aimemory_site.lib.errors import TooManyWaits, Unauthorized

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
            wakeups.wait_for(look, topics=topics, wait_seconds=wait_seconds, caller="alice")
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
    assert wakeups.wait_for(lambda: "here", topics=["t"], wait_seconds=60, caller="alice") == "here"
    assert wakeups.parked_count() == 0


def test_shutdown_answers_parked_calls_and_later_waits_at_once() -> None:
    thread, result = _park_in_thread(["t"], 60, [])
    wakeups.wake_shutdown()
    thread.join(5)
    assert result == [None]
    assert wakeups.wait_for(lambda: None, topics=["t"], wait_seconds=60, caller="alice") is None


def test_a_gone_client_ends_the_wait_without_another_look() -> None:
    looks = 0

    def look() -> None:
        nonlocal looks
        looks += 1

    def gone() -> bool:
        return True

    wakeups.wait_for(look, topics=["t"], wait_seconds=60, caller="alice", client_gone=gone)
    assert looks == 1


def test_the_transport_carries_each_publication_with_a_number_of_its_own() -> None:
    carried: list[tuple[frozenset[str], int | None]] = []
    wakeups.transport_set(lambda topics, publication: carried.append((topics, publication)))
    wakeups.wake_publish(["a", "b"])
    wakeups.wake_publish(["a"])
    wakeups.wake_publish([])
    assert [topics for topics, _ in carried] == [frozenset({"a", "b"}), frozenset({"a"})]
    first, second = (publication for _, publication in carried)
    assert first is not None and second is not None and first != second


def test_the_transport_listens_before_the_first_look() -> None:
    """Else a publication between the look and the transport's start would be missed."""
    order: list[str] = []
    wakeups.transport_set(
        lambda topics, publication: None, listen=lambda topics: order.append("listen")
    )

    def look() -> str:
        order.append("look")
        return "found"

    wakeups.wait_for(look, topics=["t"], wait_seconds=1, caller="alice")

    assert order == ["listen", "look"]


def test_wake_all_sends_every_parked_call_back_to_look() -> None:
    answers: list[object] = []
    parked = [_park_in_thread([f"t{n}"], 30, answers) for n in range(3)]
    answers.append("looked again")

    assert wakeups.wake_all() == 3

    for thread, result in parked:
        thread.join(5)
        assert result == ["looked again"]


def test_asking_after_the_client_needs_no_wake(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that cannot be watched is asked every CLIENT_CHECK_SECONDS while the call
    stays parked; only a publication sends it back to look."""
    monkeypatch.setattr(wakeups, "CLIENT_CHECK_SECONDS", 0.01)
    asked = threading.Semaphore(0)

    def client_gone() -> bool:
        asked.release()
        return False

    looks: list[object] = []

    def look() -> object | None:
        looks.append("look")
        return "found" if len(looks) > 1 else None

    result: list[object] = []
    thread = threading.Thread(
        target=lambda: result.append(
            wakeups.wait_for(
                look, topics=["inbox:t"], wait_seconds=20, caller="alice", client_gone=client_gone
            )
        )
    )
    thread.start()
    for _ in range(5):  # the client is asked again and again while it stays parked
        assert asked.acquire(timeout=5)
    assert looks == ["look"]
    wakeups.wake_publish(["inbox:t"])
    thread.join(5)

    assert result == ["found"]


class _WatchedClient:
    """A client whose leaving wakes its parked call at once, as the server's watch of its
    socket does."""

    def __init__(self) -> None:
        self._left = threading.Event()
        self._wakes: list[Callable[[], object]] = []

    def __call__(self) -> bool:
        return self._left.is_set()

    def watch(self, wake: Callable[[], object]) -> Callable[[], object]:
        self._wakes.append(wake)
        return lambda: self._wakes.remove(wake)

    def leave(self) -> None:
        self._left.set()
        for wake in list(self._wakes):
            wake()


class _Claimer:
    """A parked pop in a thread: its looks are counted, and it claims what is offered."""

    def __init__(
        self,
        topic: str,
        offered: list[str],
        gone: threading.Event | _WatchedClient | None = None,
    ) -> None:
        self.looks = 0
        self.result: list[object] = []
        self._looked = threading.Event()
        self._offered = offered
        self._gone = gone

        def look() -> str | None:
            self.looks += 1
            self._looked.set()
            return self._offered.pop() if self._offered else None

        def client_gone() -> bool:
            return isinstance(self._gone, threading.Event) and self._gone.is_set()

        self.thread = threading.Thread(
            target=lambda: self.result.append(
                wakeups.wait_for(
                    look,
                    topics=[topic],
                    wait_seconds=30,
                    caller="alice",
                    claimer=True,
                    client_gone=gone if isinstance(gone, _WatchedClient) else client_gone,
                )
            )
        )
        self.thread.start()
        assert self._looked.wait(5)
        self._looked.clear()

    def looked_again(self, seconds: float) -> bool:
        return self._looked.wait(seconds)


def test_a_publication_wakes_one_claimer_of_many() -> None:
    offered: list[str] = []
    claimers = [_Claimer("inbox:1", offered) for _ in range(5)]
    offered.append("message")

    wakeups.wake_publish(["inbox:1"])

    assert claimers[0].looked_again(5)  # the one parked longest
    claimers[0].thread.join(5)
    assert claimers[0].result == ["message"]
    assert [c.looks for c in claimers[1:]] == [1, 1, 1, 1]
    wakeups.wake_shutdown()
    for claimer in claimers[1:]:
        claimer.thread.join(5)


def test_two_publications_wake_two_claimers() -> None:
    offered: list[str] = []
    first, second, third = (_Claimer("inbox:1", offered) for _ in range(3))
    offered += ["m2", "m1"]

    wakeups.wake_publish(["inbox:1"])
    wakeups.wake_publish(["inbox:1"])

    first.thread.join(5)
    second.thread.join(5)
    assert sorted(map(str, [*first.result, *second.result])) == ["m1", "m2"]
    assert third.looks == 1
    wakeups.wake_shutdown()
    third.thread.join(5)


def test_a_woken_claimer_whose_client_has_gone_hands_the_wake_on() -> None:
    offered: list[str] = []
    gone = threading.Event()
    leaving = _Claimer("inbox:1", offered, gone)
    staying = _Claimer("inbox:1", offered)
    gone.set()
    offered.append("message")

    wakeups.wake_publish(["inbox:1"])

    leaving.thread.join(5)
    staying.thread.join(5)
    assert leaving.result == [None]
    assert leaving.looks == 1  # it never looked after the wake
    assert staying.result == ["message"]


def test_a_publication_received_again_wakes_no_second_claimer() -> None:
    """PostgreSQL's NOTIFY reaches its own publisher too: the echo finds the claimer
    wake of its publication taken."""
    carried: list[int | None] = []
    wakeups.transport_set(lambda topics, publication: carried.append(publication))
    offered: list[str] = []
    first, second = _Claimer("inbox:1", offered), _Claimer("inbox:1", offered)
    offered.append("message")

    wakeups.wake_publish(["inbox:1"])
    assert wakeups.wake_deliver(["inbox:1"], carried[0]) == 0  # the echo

    first.thread.join(5)
    assert first.result == ["message"]
    assert not second.looked_again(0.3)
    wakeups.wake_shutdown()
    second.thread.join(5)


def test_a_publication_whose_wake_another_process_took_wakes_no_claimer_here() -> None:
    """The host's other process took it: one pop of the host looks, not one per process."""
    parked = _Claimer("inbox:1", [])
    publication = wakeups.publication_draw()
    assert wait_caps.counts().claimer_wake_take("inbox:1", publication)  # the other process

    assert wakeups.wake_deliver(["inbox:1"], publication) == 0
    assert wakeups.wake_deliver(["inbox:1"], wakeups.publication_draw()) == 1  # the next
    assert parked.looked_again(5)
    wakeups.wake_shutdown()
    parked.thread.join(5)


def test_a_publication_without_a_number_wakes_a_claimer_here_whatever_the_others_did() -> None:
    parked = _Claimer("inbox:1", [])

    assert wakeups.wake_deliver(["inbox:1"]) == 1
    assert parked.looked_again(5)
    wakeups.wake_shutdown()
    parked.thread.join(5)


def test_a_wake_handed_on_with_no_claimer_left_here_goes_to_the_other_processes() -> None:
    carried: list[tuple[frozenset[str], int | None]] = []
    wakeups.transport_set(lambda topics, publication: carried.append((topics, publication)))
    gone = threading.Event()
    leaving = _Claimer("inbox:1", [], gone)
    gone.set()

    wakeups.wake_deliver(["inbox:1"], wakeups.publication_draw())  # from another process
    leaving.thread.join(5)

    assert leaving.result == [None]
    assert len(carried) == 1
    topics, publication = carried[0]
    assert topics == frozenset({"inbox:1"}) and publication is not None


def test_a_claimer_whose_client_leaves_unwoken_hands_nothing_on() -> None:
    """Its client's leaving woke it, not a publication: no message waits for a look."""
    carried: list[frozenset[str]] = []
    wakeups.transport_set(lambda topics, publication: carried.append(topics))
    leaving = _Claimer("inbox:1", [], client := _WatchedClient())
    staying = _Claimer("inbox:1", [])

    client.leave()
    leaving.thread.join(5)

    assert leaving.result == [None]
    assert not staying.looked_again(0.3)
    assert carried == []
    wakeups.wake_shutdown()
    staying.thread.join(5)


def test_a_claimer_whose_look_found_nothing_wakes_no_one_else() -> None:
    """Another pop took the message first: waking the next would only look again."""
    first, second = _Claimer("inbox:1", []), _Claimer("inbox:1", [])

    wakeups.wake_publish(["inbox:1"])

    assert first.looked_again(5)
    assert not second.looked_again(0.3)
    wakeups.wake_shutdown()
    first.thread.join(5)
    second.thread.join(5)


def test_a_claimer_woken_again_before_it_looks_hands_the_second_wake_on() -> None:
    """Two sends woke it: the second after it had taken the first's wake, before its look
    began. Its look claims one message; the other's wake goes to the next claimer."""
    offered: list[str] = []
    parked, rechecking, go_on = threading.Event(), threading.Event(), threading.Event()
    result: list[object] = []

    def look() -> str | None:
        parked.set()
        return offered.pop() if offered else None

    def recheck() -> None:  # between the wake and the look
        rechecking.set()
        assert go_on.wait(5)

    first = threading.Thread(
        target=lambda: result.append(
            wakeups.wait_for(
                look,
                topics=["inbox:1"],
                wait_seconds=30,
                caller="alice",
                recheck=recheck,
                claimer=True,
            )
        )
    )
    first.start()
    assert parked.wait(5)
    second = _Claimer("inbox:1", offered)
    offered.append("m1")
    wakeups.wake_publish(["inbox:1"])
    assert rechecking.wait(5)
    offered.insert(0, "m2")
    wakeups.wake_publish(["inbox:1"])
    go_on.set()

    first.join(5)
    second.thread.join(5)
    assert result == ["m1"]
    assert second.result == ["m2"]


def test_a_wait_over_the_callers_cap_is_refused_before_it_looks(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wait_caps, "_counts", wait_caps.WaitCounts(10, 1))
    parked = _Claimer("inbox:1", [])
    looks: list[str] = []

    with pytest.raises(TooManyWaits) as refused:
        wakeups.wait_for(
            lambda: looks.append("look"), topics=["inbox:1"], wait_seconds=5, caller="alice"
        )

    assert looks == []
    assert refused.value.http_status == 429
    assert refused.value.retry_after_s > 0
    assert "wait_seconds" in refused.value.message
    # Another caller still parks.
    assert wakeups.wait_for(lambda: "bob's", topics=["t"], wait_seconds=5, caller="bob") == "bob's"
    wakeups.wake_shutdown()
    parked.thread.join(5)
    assert wait_caps.counts().parked() == 0


def test_a_newer_wait_of_a_place_takes_the_older_ones_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(wait_caps, "_counts", wait_caps.WaitCounts(1, 1))
    older_parked = threading.Event()
    older_result: list[object] = []

    def older_look() -> None:
        older_parked.set()

    older = threading.Thread(
        target=lambda: older_result.append(
            wakeups.wait_for(
                older_look, topics=["session:s"], wait_seconds=30, caller="alice", place="s"
            )
        )
    )
    older.start()
    assert older_parked.wait(5)

    newer = wakeups.wait_for(
        lambda: "newer", topics=["session:s"], wait_seconds=5, caller="alice", place="s"
    )

    assert newer == "newer"
    wakeups.wake_shutdown()
    older.join(5)
    assert wait_caps.counts().parked() == 0


def test_a_recheck_that_refuses_ends_the_wait_with_its_error() -> None:
    """A token revoked while the call was parked: the look after the wake never runs."""
    revoked = threading.Event()
    looked = threading.Event()
    looks: list[str] = []
    raised: list[Unauthorized] = []

    def recheck() -> None:
        if revoked.is_set():
            raise Unauthorized("invalid or revoked token")

    def look() -> None:
        looks.append("look")
        looked.set()

    def wait() -> None:
        try:
            wakeups.wait_for(look, topics=["t"], wait_seconds=30, caller="alice", recheck=recheck)
        except Unauthorized as exc:
            raised.append(exc)

    thread = threading.Thread(target=wait)
    thread.start()
    assert looked.wait(5)
    revoked.set()
    wakeups.wake_publish(["t"])
    thread.join(5)

    assert looks == ["look"]
    assert [exc.http_status for exc in raised] == [401]


def test_a_recheck_that_refuses_at_the_timeout_answers_its_error() -> None:
    def recheck() -> None:
        raise Unauthorized("invalid or revoked token")

    with pytest.raises(Unauthorized):
        wakeups.wait_for(
            lambda: None, topics=["t"], wait_seconds=0.05, caller="alice", recheck=recheck
        )


def test_a_wake_handed_on_reaches_the_next_claimer_and_no_other_waiter() -> None:
    """A session wait on the same inbox is woken by the send, not again by the hand-on."""
    session_looks: list[str] = []
    session_parked = threading.Event()
    session_woken = threading.Event()

    def session_look() -> None:
        session_looks.append("look")
        (session_woken if session_parked.is_set() else session_parked).set()

    session = threading.Thread(
        target=lambda: wakeups.wait_for(
            session_look, topics=["inbox:1"], wait_seconds=30, caller="alice"
        )
    )
    session.start()
    assert session_parked.wait(5)
    gone = threading.Event()
    leaving = _Claimer("inbox:1", [], gone)
    offered: list[str] = []
    staying = _Claimer("inbox:1", offered)
    gone.set()
    offered.append("message")

    wakeups.wake_publish(["inbox:1"])

    leaving.thread.join(5)
    staying.thread.join(5)
    assert staying.result == ["message"]
    # Its first look, and the one the send woke (in its own thread: wait for it), and no
    # third from the hand-on.
    assert session_woken.wait(5)
    leaving.thread.join(5)
    assert session_looks == ["look", "look"]
    wakeups.wake_shutdown()
    session.join(5)
