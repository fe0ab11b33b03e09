"""The wake transports in this process. PostgreSQL: NOTIFYs in, wakes out, a topic's
channel listened only while a call waits on it, and back after its connection is cut.
Across processes and hosts: tests/test_wait_serving.py."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from django.db import connection

from aimemory_site.lib import wake_transport, wakeups
from aimemory_site.lib.wake_transport import topic_digest, wake_channel, wake_dir

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def transport(monkeypatch: pytest.MonkeyPatch) -> Iterator[wake_transport._PostgresTransport]:
    if connection.vendor != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    monkeypatch.setattr(wakeups, "_registry", wakeups._Registry())
    monkeypatch.setattr(wake_transport, "RECONNECT_MIN_SECONDS", 0.05)
    installed = wake_transport._PostgresTransport()
    monkeypatch.setattr(wakeups, "_transport", installed.send)
    monkeypatch.setattr(wakeups, "_listen", installed.listen)
    monkeypatch.setattr(wakeups, "_unlisten", installed.unlisten)
    yield installed
    installed.stop()


def _dsn() -> str:
    params = wake_transport._listener_params()
    return " ".join(f"{key}={value}" for key, value in params.items() if key != "application_name")


def _park(
    topic: str, woken: threading.Event, answers: list[object], wait_seconds: float = 20
) -> threading.Thread:
    """Wait on ``topic`` in a thread; ``woken`` is set when the look runs after a park.
    Returns once the first look has run: the topic's LISTEN is in place then."""
    looks = 0
    looked = threading.Event()

    def look() -> object | None:
        nonlocal looks
        looks += 1
        looked.set()
        if looks > 1:
            woken.set()
            return "woken"
        return None

    thread = threading.Thread(
        target=lambda: answers.append(
            wakeups.wait_for(look, topics=[topic], wait_seconds=wait_seconds, caller="alice")
        )
    )
    thread.start()
    assert looked.wait(5)
    return thread


def _listen_on(other: psycopg.Connection[Any], *topics: str) -> None:
    """Listen as another process's transport does: its marks taken, then its LISTENs."""
    channels = {wake_channel(topic) for topic in topics}
    other.execute(wake_transport._listen_statement("LISTEN", channels))


def _marks_held() -> int:
    with psycopg.connect(_dsn(), autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = %s",
            [wake_transport.LISTENER_MARK_CLASS],
        ).fetchone()
    assert row is not None
    return int(row[0])


def _thread_turned(
    transport: wake_transport._PostgresTransport, other: psycopg.Connection[Any]
) -> None:
    """Return once the transport's thread has been round its loop since now: it sends a
    queued publication after it has UNLISTENed what no call waits on."""
    _listen_on(other, "turn:marker")
    with transport._lock:
        transport._pending["turn:marker"] = None
    transport._poke()
    assert [n.payload for n in other.notifies(timeout=5, stop_after=1)] == ["turn:marker"]


def test_a_notify_from_another_connection_wakes_a_parked_call(
    transport: wake_transport._PostgresTransport,
) -> None:
    woken, answers = threading.Event(), list[object]()
    thread = _park("inbox:elsewhere", woken, answers)

    _notify("inbox:elsewhere")

    assert woken.wait(5)
    thread.join(5)
    assert answers == ["woken"]


def test_a_publication_goes_out_as_a_notify(transport: wake_transport._PostgresTransport) -> None:
    with psycopg.connect(_dsn(), autocommit=True) as other:
        _listen_on(other, "message:m-1", "inbox:i-1")

        wakeups.wake_publish(["message:m-1", "inbox:i-1"])

        received = {
            (n.channel, *wake_transport.publication_parse(n.payload))
            for n in other.notifies(timeout=5, stop_after=2)
        }
    (publication,) = {number for _, _, number in received}
    assert publication is not None  # one publication: one number for both
    assert received == {
        (wake_channel("message:m-1"), "message:m-1", publication),
        (wake_channel("inbox:i-1"), "inbox:i-1", publication),
    }


def test_a_publication_payload_reads_back_as_its_topic_and_number() -> None:
    for topic in ("inbox:1", "session:a b", "message:9 7"):
        for number in (None, 1, 2**63 - 1):
            payload = wake_transport.publication_payload(topic, number)
            assert wake_transport.publication_parse(payload) == (topic, number)


def _topic(payload: str) -> str:
    return wake_transport.publication_parse(payload)[0]


def _unheard(cursor: Any, topic: str) -> bool:
    cursor.execute(f"SELECT {wake_transport.unheard_sql('%s')}", [topic])
    return bool(cursor.fetchone()[0])


def test_a_write_finds_a_topic_unheard_until_a_process_waits_on_it(
    transport: wake_transport._PostgresTransport,
) -> None:
    topic = "inbox:written-to"
    with psycopg.connect(_dsn(), autocommit=True) as writer:
        assert _unheard(writer.cursor(), topic)
        woken, answers = threading.Event(), list[object]()
        thread = _park(topic, woken, answers)
        assert not _unheard(writer.cursor(), topic)
        assert _unheard(writer.cursor(), "inbox:another")

        _notify(topic)
        assert woken.wait(5)
        thread.join(5)
        with psycopg.connect(_dsn(), autocommit=True) as other:
            _thread_turned(transport, other)  # it UNLISTENs once the last call has left
        assert _unheard(writer.cursor(), topic)


def test_a_call_that_begins_to_wait_during_an_unheard_write_looks_after_its_commit(
    transport: wake_transport._PostgresTransport,
) -> None:
    """The write that found no one waiting holds the mark to its commit: a call that
    begins to wait meanwhile takes its mark, and looks, only after the commit, so it
    finds what was written without a publication."""
    topic = "inbox:raced"
    looked_at: list[float] = []
    with psycopg.connect(_dsn()) as writer:  # a transaction, held open below
        assert _unheard(writer.cursor(), topic)

        def look() -> str:
            looked_at.append(time.monotonic())
            return "looked"

        waiter = threading.Thread(
            target=lambda: wakeups.wait_for(look, topics=[topic], wait_seconds=10, caller="alice")
        )
        waiter.start()
        waiter.join(0.3)  # it is held at its mark, not parked: nothing to wait for
        assert looked_at == []
        committed_at = time.monotonic()
        writer.commit()
        waiter.join(5)
    assert len(looked_at) == 1
    assert looked_at[0] >= committed_at


def test_a_process_holds_its_mark_while_a_call_waits_and_lets_it_go_after(
    transport: wake_transport._PostgresTransport,
) -> None:
    assert _marks_held() == 0
    woken, answers = threading.Event(), list[object]()
    thread = _park("inbox:marked-while-waiting", woken, answers)
    assert _marks_held() == 1

    _notify("inbox:marked-while-waiting")
    assert woken.wait(5)
    thread.join(5)
    with psycopg.connect(_dsn(), autocommit=True) as other:
        _thread_turned(transport, other)  # it UNLISTENs once the last call has left
    assert not transport._listened
    assert _marks_held() == 0


def test_a_topic_longer_than_a_channel_name_is_carried(
    transport: wake_transport._PostgresTransport,
) -> None:
    """A session id runs to 200 characters; PostgreSQL cuts a channel's name at 63."""
    topic = wakeups.session_topic("s" * 200)
    woken, answers = threading.Event(), list[object]()
    thread = _park(topic, woken, answers)

    _notify(topic)

    assert woken.wait(5)
    thread.join(5)
    assert answers == ["woken"]
    assert len(wake_channel(topic)) <= 63


def test_a_process_hears_only_the_channels_its_calls_wait_on(
    transport: wake_transport._PostgresTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    heard: list[str] = []
    deliver = wakeups.wake_deliver

    def recorded(topics: Iterable[str], publication: int | None = None) -> int:
        heard.extend(topics := list(topics))
        return deliver(topics, publication)

    monkeypatch.setattr(wakeups, "wake_deliver", recorded)
    woken, answers = threading.Event(), list[object]()
    thread = _park("inbox:waited-on", woken, answers)

    # Topics share channels (wake_transport.WAKE_CHANNELS): these two do not.
    assert wake_channel("inbox:not-waited-on") != wake_channel("inbox:waited-on")
    with psycopg.connect(_dsn(), autocommit=True) as other:  # in this order, on one
        for topic in ("inbox:not-waited-on", "inbox:waited-on"):
            other.execute("SELECT pg_notify(%s, %s)", [wake_channel(topic), topic])

    assert woken.wait(5)
    thread.join(5)
    assert heard == ["inbox:waited-on"]


def _sharing_a_channel(topic: str) -> str:
    """Another topic on ``topic``'s channel."""
    return next(
        other
        for n in range(100_000)
        if wake_channel(other := f"inbox:neighbour-{n}") == wake_channel(topic)
    )


def test_a_publication_on_a_shared_channel_wakes_only_its_topics_calls(
    transport: wake_transport._PostgresTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = "inbox:waited-on"
    neighbour = _sharing_a_channel(topic)
    woken_by: dict[str, int] = {}
    heard = threading.Event()
    deliver = wakeups.wake_deliver

    def recorded(topics: Iterable[str], publication: int | None = None) -> int:
        topics = list(topics)
        woken_by[topics[0]] = count = deliver(topics, publication)
        heard.set()
        return count

    monkeypatch.setattr(wakeups, "wake_deliver", recorded)
    woken, answers = threading.Event(), list[object]()
    thread = _park(topic, woken, answers)

    _notify(neighbour)
    assert heard.wait(5)  # the process hears the channel, and wakes no one with it
    assert woken_by == {neighbour: 0}
    _notify(topic)
    assert woken.wait(5)
    thread.join(5)
    assert woken_by[topic] == 1
    assert answers == ["woken"]


def test_calls_on_thousands_of_topics_hold_at_most_one_mark_per_channel(
    transport: wake_transport._PostgresTransport,
) -> None:
    """Each mark is an entry of the server's shared lock table, which 10,000 calls parked
    on as many inboxes once filled."""
    topics = frozenset(f"inbox:many-{n}" for n in range(2_000))
    transport.listen(topics)
    try:
        assert len(transport._listened) == wake_transport.WAKE_CHANNELS
        assert _marks_held() == wake_transport.WAKE_CHANNELS
    finally:
        transport.unlisten(topics)
    with psycopg.connect(_dsn(), autocommit=True) as other:
        _thread_turned(transport, other)
    assert not transport._listened
    assert _marks_held() == 0


def test_a_topic_stays_listened_while_any_call_waits_on_it(
    transport: wake_transport._PostgresTransport,
) -> None:
    short_woken, short_answers = threading.Event(), list[object]()
    long_woken, long_answers = threading.Event(), list[object]()
    long = _park("inbox:shared", long_woken, long_answers)
    short = _park("inbox:shared", short_woken, short_answers, wait_seconds=0.1)
    short.join(5)
    assert short_answers == [None]

    with psycopg.connect(_dsn(), autocommit=True) as other:
        _thread_turned(transport, other)
        assert wake_channel("inbox:shared") in transport._listened

        _notify("inbox:shared")
        assert long_woken.wait(5)
        long.join(5)
        _thread_turned(transport, other)
    assert long_answers == ["woken"]
    assert not transport._listened


def test_a_notify_after_a_publication_whose_answer_is_unread_still_wakes(
    transport: wake_transport._PostgresTransport,
) -> None:
    """A publication's answer is read later, and libpq reads no notification that comes
    after an answer not taken yet: the thread takes it."""
    woken, answers = threading.Event(), list[object]()
    thread = _park("inbox:after-an-answer", woken, answers)
    wakeups.wake_publish(["inbox:someone-else"])  # sent; its answer is not read here

    _notify("inbox:after-an-answer")

    assert woken.wait(5)
    thread.join(5)
    assert answers == ["woken"]


def test_a_publication_sent_as_its_connection_broke_is_sent_again(
    transport: wake_transport._PostgresTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A publication is sent without waiting for its answer; once the transport finds the
    connection broken (at the next publication, or its heartbeat), every one whose answer
    it had not read goes out again on the reconnected one."""
    monkeypatch.setattr(wake_transport, "HEARTBEAT_SECONDS", 0.2)
    with psycopg.connect(_dsn(), autocommit=True) as other:
        _listen_on(other, "inbox:first", "inbox:second", "inbox:third")
        wakeups.wake_publish(["inbox:first"])  # the transport connects and sends it
        assert [_topic(n.payload) for n in other.notifies(timeout=5, stop_after=1)] == [
            "inbox:first"
        ]
        wakeups.wake_publish(["inbox:second"])  # sent, its answer unread
        _transport_terminate(other)
        wakeups.wake_publish(["inbox:third"])  # may be sent before the end shows

        received: set[str] = set()
        for notify in other.notifies(timeout=10):
            received.add(_topic(notify.payload))
            if received >= {"inbox:second", "inbox:third"}:
                break
    assert received >= {"inbox:second", "inbox:third"}
    assert transport.connects == 2


def test_with_no_call_waiting_it_unlistens_and_listens_again_for_the_next(
    transport: wake_transport._PostgresTransport, monkeypatch: pytest.MonkeyPatch
) -> None:
    heard: list[str] = []
    second_heard = threading.Event()
    deliver = wakeups.wake_deliver

    def recorded(topics: Iterable[str], publication: int | None = None) -> int:
        for topic in (topics := list(topics)):
            heard.append(topic)
            if topic == "inbox:second-wait":
                second_heard.set()
        return deliver(topics, publication)

    monkeypatch.setattr(wakeups, "wake_deliver", recorded)
    woken, answers = threading.Event(), list[object]()
    thread = _park("inbox:first-wait", woken, answers)
    _notify("inbox:first-wait")
    thread.join(5)
    assert answers == ["woken"]

    with psycopg.connect(_dsn(), autocommit=True) as other:
        _thread_turned(transport, other)  # it UNLISTENs once the last call has left
    assert not transport._listened
    _notify("inbox:first-wait")  # no call waits: the process is not told

    # This wait ends only once its topic has come through the transport (a look after
    # the LISTEN's own "look again" finds nothing yet).
    answers = []
    thread = threading.Thread(
        target=lambda: answers.append(
            wakeups.wait_for(
                lambda: "heard" if second_heard.is_set() else None,
                topics=["inbox:second-wait"],
                wait_seconds=20,
                caller="alice",
            )
        )
    )
    thread.start()
    deadline = time.monotonic() + 5
    while wake_channel("inbox:second-wait") not in transport._listened:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    _notify("inbox:second-wait")
    assert second_heard.wait(5)  # carried by the LISTEN taken again
    thread.join(5)
    assert answers == ["heard"]
    assert heard == ["inbox:first-wait", "inbox:second-wait"]


def _transport_terminate(admin: psycopg.Connection[Any]) -> None:
    """End the transport's connections from the server's side, as a restart would."""
    admin.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
        "WHERE application_name = 'ai-memory wake transport'"
    )


def _notify(topic: str) -> None:
    with psycopg.connect(_dsn(), autocommit=True) as other:
        other.execute("SELECT pg_notify(%s, %s)", [wake_channel(topic), topic])


def test_after_its_connection_is_cut_it_reconnects_and_every_parked_call_looks_again(
    transport: wake_transport._PostgresTransport,
) -> None:
    woken, answers = threading.Event(), list[object]()
    thread = _park("inbox:never-published", woken, answers)
    assert transport.connects == 1

    with psycopg.connect(_dsn(), autocommit=True) as admin:
        _transport_terminate(admin)

    # Nothing was published, but what was meanwhile could have been lost: it looks again.
    assert woken.wait(10)
    thread.join(5)
    assert answers == ["woken"]
    assert transport.connects == 2


def test_the_wake_dir_is_in_the_data_dir_unless_its_path_is_too_long(tmp_path: Path) -> None:
    assert wake_dir(tmp_path) == tmp_path.resolve() / "wake"
    deep = tmp_path / ("d" * 120)
    assert wake_dir(deep).name.startswith("ai-memory-wake-")
    assert wake_dir(deep) == wake_dir(deep)


def test_the_socket_transport_is_found_by_publishers_only_while_a_call_waits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite's transport: a process's socket is bound once, and linked where publishers
    of a topic look only between the first ``listen`` of that topic and its last
    ``unlisten``; what is sent there meanwhile wakes the calls parked here."""
    monkeypatch.setattr(wakeups, "_registry", wakeups._Registry())
    transport = wake_transport._SocketTransport(tmp_path / "wake")
    linked = tmp_path / "wake" / topic_digest("inbox:a") / f"{os.getpid()}.sock"

    transport.listen(frozenset({"inbox:a"}))
    transport.listen(frozenset({"inbox:a", "inbox:b"}))
    assert linked.exists()
    transport.unlisten(frozenset({"inbox:a"}))
    assert linked.exists()  # one call still waits on it

    with wakeups.wake_subscription(["inbox:by-datagram"]) as waiter:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as publisher:
            datagram = {"publication": None, "topics": ["inbox:by-datagram"]}
            publisher.sendto(json.dumps(datagram).encode(), str(linked))
        assert waiter.wait(5)

    transport.unlisten(frozenset({"inbox:a", "inbox:b"}))
    assert not linked.exists()
    assert not linked.parent.exists()  # no process's link is left in it
    assert (tmp_path / "wake" / f".{os.getpid()}.sock").exists()  # still bound
    transport.send(frozenset({"inbox:unheard"}))  # finds no one, and raises nothing


def _other_process_listening(wake: Path, pid: int, topics: Iterable[str]) -> socket.socket:
    """A socket standing for process ``pid``'s, linked where publishers of ``topics``
    look, as its transport links it."""
    wake.mkdir(exist_ok=True)
    receiver = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    receiver.bind(str(wake / f".{pid}.sock"))
    receiver.settimeout(0.5)
    for topic in topics:
        (wake / topic_digest(topic)).mkdir(exist_ok=True)
        os.link(wake / f".{pid}.sock", wake / topic_digest(topic) / f"{pid}.sock")
    return receiver


def test_a_publication_reaches_only_the_processes_waiting_on_its_topics(
    tmp_path: Path,
) -> None:
    """With one socket name for all, every send woke the receiver thread of every process
    with a parked call, and 500 parked pops cost sends a tenth of their rate."""
    wake = tmp_path / "wake"
    transport = wake_transport._SocketTransport(wake)
    with (
        _other_process_listening(wake, 1, ["inbox:a", "inbox:b"]) as both,
        _other_process_listening(wake, 2, ["inbox:b"]) as other,
    ):
        transport.send(frozenset({"inbox:a", "inbox:c"}), 7)
        assert json.loads(both.recv(4096)) == {"publication": 7, "topics": ["inbox:a"]}
        with pytest.raises(TimeoutError):
            other.recv(4096)

        transport.send(frozenset({"inbox:a", "inbox:b"}), 8)
        both_topics = {"publication": 8, "topics": ["inbox:a", "inbox:b"]}
        assert json.loads(both.recv(4096)) == both_topics  # one datagram
        assert json.loads(other.recv(4096)) == {"publication": 8, "topics": ["inbox:b"]}
        with pytest.raises(TimeoutError):
            both.recv(4096)


def test_a_publisher_removes_the_link_of_a_process_that_has_died(tmp_path: Path) -> None:
    wake = tmp_path / "wake"
    _other_process_listening(wake, 1, ["inbox:a"]).close()  # bound, then gone
    wake_transport._SocketTransport(wake).send(frozenset({"inbox:a"}))
    assert not (wake / topic_digest("inbox:a") / "1.sock").exists()


def test_a_process_binding_its_socket_clears_what_dead_ones_left(tmp_path: Path) -> None:
    wake = tmp_path / "wake"
    dead = 2**22 + 1  # above the kernel's largest pid
    _other_process_listening(wake, dead, ["inbox:a"]).close()
    _other_process_listening(wake, os.getpid(), ["inbox:b"]).close()  # an earlier life
    transport = wake_transport._SocketTransport(wake)
    transport.listen(frozenset({"inbox:c"}))
    assert sorted(p.name for p in wake.iterdir()) == [
        f".{os.getpid()}.sock",
        topic_digest("inbox:c"),
    ]
