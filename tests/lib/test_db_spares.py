"""Connections a request lets go of (a parked call's too) serve the next one that
connects, on either database; a parked call holds none; a spare the database closed is
not handed out."""

from __future__ import annotations

import select
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction

from aimemory_site.lib import db_spares, wakeups

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("wakeups_alone")]


@pytest.fixture(autouse=True)
def no_spares() -> Iterator[None]:
    _spares_closed()
    yield
    _spares_closed()
    db_spares.open_limit_set(None)


def _spares_closed() -> None:
    while (spare := db_spares.spare_take(connection.alias, None)) is not None:
        spare[0].close()
        db_spares.connection_closed(connection.alias)
    db_spares.connection_closed(connection.alias)  # the count spare_take made for a connect


def _in_thread(work: Callable[[], Any]) -> Any:
    """``work()`` in a thread of its own, which closes whatever it still holds after."""
    result: list[Any] = []

    def run() -> None:
        try:
            result.append(work())
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    return result[0]


def _connected() -> Any:
    """This thread's open driver connection, after a query."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return connection.connection


def _let_go() -> Any:
    """Connect, then let go of the connection; the driver's connection it was."""
    raw = _connected()
    db_spares.connections_let_go()
    assert connection.connection is None  # the thread holds none
    return raw


def test_a_connection_let_go_of_is_the_next_threads() -> None:
    first = _in_thread(_let_go)
    assert db_spares.spares_count() == 1
    assert _in_thread(_connected) is first
    assert db_spares.spares_count() == 0


def test_past_the_spares_kept_it_is_closed() -> None:
    """More requests than ``SPARES_KEPT`` each hold a connection at once, then let go."""
    count = db_spares.SPARES_KEPT + 2
    all_connected = threading.Barrier(count)

    def connect_then_let_go() -> Any:
        raw = _connected()
        all_connected.wait(10)
        db_spares.connections_let_go()
        return raw

    threads = [
        threading.Thread(target=_in_thread, args=(connect_then_let_go,)) for _ in range(count)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert db_spares.spares_count() == db_spares.SPARES_KEPT


def test_a_spare_older_than_the_connections_age_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(connection.settings_dict, "CONN_MAX_AGE", 0)
    first = _in_thread(_let_go)
    assert db_spares.spares_count() == 1
    assert _in_thread(_connected) is not first
    assert db_spares.spares_count() == 0


def test_a_connection_inside_a_transaction_is_kept() -> None:
    def in_transaction() -> tuple[Any, Any]:
        with transaction.atomic():
            raw = _connected()
            db_spares.connections_let_go()
            return raw, connection.connection

    raw, still = _in_thread(in_transaction)
    assert still is raw
    assert db_spares.spares_count() == 0


def test_a_connection_that_met_an_error_is_closed() -> None:
    def failed() -> Any:
        raw = _connected()
        with pytest.raises(DatabaseError), connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table")
        db_spares.connections_let_go()
        return raw

    first = _in_thread(failed)
    assert db_spares.spares_count() == 0
    assert _in_thread(_connected) is not first


def test_a_parked_call_lets_go_of_its_connection_for_the_look_after_the_wake() -> None:
    """The call parks with none, and the look after the wake takes it back."""
    seen: list[Any] = []
    parked = threading.Event()

    def look() -> Any:
        if seen:
            seen.append(connection.connection)  # before the look's query: None
        seen.append(_connected())
        parked.set()
        return seen[-1] if len(seen) > 2 else None

    def wait() -> Any:
        return wakeups.wait_for(look, topics=["t"], wait_seconds=30, caller="alice")

    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(_in_thread(wait)))
    thread.start()
    assert parked.wait(10)
    while db_spares.spares_count() == 0:  # the park lets go after the first look
        thread.join(0.01)
    wakeups.wake_publish(["t"])
    thread.join(10)
    first_look, before_second, second_look = seen
    assert before_second is None
    assert second_look is first_look
    assert result == [first_look]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="a server that closes")
def test_a_spare_the_server_closed_is_not_handed_out() -> None:
    """After a restart of PostgreSQL every spare is dead: the next request connects
    afresh instead of failing with a 503 (the spare is checked as it is taken)."""
    connection.ensure_connection()  # this thread's own, not the spare it would take
    first = _in_thread(_let_go)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [first.info.backend_pid])
    # A barrier, not a pause: the server's goodbye has reached the spare's socket.
    assert select.select([first.pgconn.socket], [], [], 5)[0]

    assert _in_thread(_connected) is not first


def test_past_the_open_limit_a_request_waits_for_a_connection_let_go_of() -> None:
    """Under the server every request may open a connection: the limit makes the one
    past it wait for another's, within its budget, rather than open one more."""
    from aimemory_site.db_deadline import database_budget

    _in_thread(_connected)  # the test's own thread holds none; this counts one, closed
    base = db_spares.open_count(connection.alias)
    db_spares.open_limit_set(base + 1)
    holding = threading.Event()
    release = threading.Event()

    def hold() -> Any:
        raw = _connected()
        holding.set()
        release.wait(10)
        db_spares.connections_let_go()
        return raw

    def waiting() -> Any:
        with database_budget(10.0):
            return _connected()

    holder = threading.Thread(target=lambda: result.append(_in_thread(hold)))
    result: list[Any] = []
    holder.start()
    assert holding.wait(10)
    waiter_result: list[Any] = []
    waiter = threading.Thread(target=lambda: waiter_result.append(_in_thread(waiting)))
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive()  # waiting for the held connection
    release.set()
    holder.join(10)
    waiter.join(10)
    assert waiter_result == result  # the very connection let go of


def test_past_the_open_limit_a_request_whose_budget_runs_out_gets_a_timeout() -> None:
    from aimemory_site.db_deadline import DatabaseTimeout, database_budget

    raw = _connected()  # held by this thread throughout
    db_spares.open_limit_set(db_spares.open_count(connection.alias))

    def waiting() -> BaseException | None:
        try:
            with database_budget(0.2):
                _connected()
        except DatabaseTimeout as exc:
            return exc
        return None

    assert isinstance(_in_thread(waiting), DatabaseTimeout)
    assert connection.connection is raw
