"""Connections a thread lets go of (a parked call's) serve the next thread that connects,
on either database; a parked call holds none."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction

from aimemory_site.lib import db_spares, wakeups

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("wakeups_alone")]


@pytest.fixture(autouse=True)
def no_spares() -> Iterator[None]:
    db_spares._forget_in_child()
    yield
    for spares in db_spares._spares.values():
        for spare in spares:
            spare.connection.close()
    db_spares._forget_in_child()


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


def _room(spares: int) -> bool:
    return spares < 4


def _let_go(room: Callable[[int], bool] = _room) -> Any:
    """Connect, then let go of the connection; the driver's connection it was."""
    raw = _connected()
    db_spares.connections_let_go(room)
    assert connection.connection is None  # the thread holds none
    return raw


def test_a_connection_let_go_of_is_the_next_threads() -> None:
    first = _in_thread(_let_go)
    assert db_spares.spares_count() == 1
    assert _in_thread(_connected) is first
    assert db_spares.spares_count() == 0


def test_without_room_it_is_closed() -> None:
    first = _in_thread(lambda: _let_go(lambda spares: False))
    assert db_spares.spares_count() == 0
    assert _in_thread(_connected) is not first


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
            db_spares.connections_let_go(_room)
            return raw, connection.connection

    raw, still = _in_thread(in_transaction)
    assert still is raw
    assert db_spares.spares_count() == 0


def test_a_connection_that_met_an_error_is_closed() -> None:
    def failed() -> Any:
        raw = _connected()
        with pytest.raises(DatabaseError), connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table")
        db_spares.connections_let_go(_room)
        return raw

    first = _in_thread(failed)
    assert db_spares.spares_count() == 0
    assert _in_thread(_connected) is not first


def test_a_parked_call_lets_go_of_its_connection_for_the_look_after_the_wake() -> None:
    """The worker's release hook hands the connection over (``gunicorn_worker``): the
    call parks with none, and the look after the wake takes it back."""
    seen: list[Any] = []
    parked = threading.Event()

    def release() -> None:
        db_spares.connections_let_go(_room)
        seen.append(connection.connection)  # None: a parked call holds no connection
        parked.set()

    def look() -> Any:
        seen.append(_connected())
        return seen[-1] if len(seen) > 2 else None

    def wait() -> Any:
        with wakeups.parking_hooks(release, lambda: None):
            return wakeups.wait_for(look, topics=["t"], wait_seconds=30)

    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(_in_thread(wait)))
    thread.start()
    assert parked.wait(10)
    assert db_spares.spares_count() == 1
    wakeups.wake_publish(["t"])
    thread.join(10)
    first_look, while_parked, second_look = seen
    assert while_parked is None
    assert second_look is first_look
    assert result == [first_look]
