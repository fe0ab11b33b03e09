"""How a parked call learns that its client has gone under the worker of ``ai-memory
serve`` (``aimemory_site.gunicorn_worker._WatchedClient``): the process's client watcher
wakes it when the client hangs up, so it is never woken just to ask.

That a served pop whose client left claims nothing is tested against spawned servers in
tests/test_wait_serving.py.
"""

from __future__ import annotations

import socket
import threading

import pytest

from aimemory_site.gunicorn_worker import _WatchedClient
from aimemory_site.lib import wakeups

pytestmark = pytest.mark.usefixtures("wakeups_alone")


class _CountedClient(_WatchedClient):
    __slots__ = ("asked",)

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock)
        self.asked = 0

    def __call__(self) -> bool:
        self.asked += 1
        return super().__call__()


def _wait_in_thread(
    client: _WatchedClient, wait_seconds: float
) -> tuple[threading.Thread, list[object], list[int]]:
    """Start a wait that finds nothing; returns the thread, its answer and its looks."""
    looked = threading.Event()
    looks = [0]
    result: list[object] = []

    def look() -> None:
        looks[0] += 1
        looked.set()

    thread = threading.Thread(
        target=lambda: result.append(
            wakeups.wait_for(
                look, topics=["inbox:t"], wait_seconds=wait_seconds, client_gone=client
            )
        )
    )
    thread.start()
    assert looked.wait(5)
    return thread, result, looks


def test_a_client_that_hangs_up_ends_its_parked_wait_at_once(
    pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Asking every minute: only the watcher can end the wait within the join below.
    monkeypatch.setattr(wakeups, "CLIENT_CHECK_SECONDS", 60)
    client, server = pair
    thread, result, looks = _wait_in_thread(_WatchedClient(server), wait_seconds=60)

    client.close()
    thread.join(5)

    assert not thread.is_alive()
    assert result == [None]
    assert looks == [1]  # a pop whose client left claims nothing


def test_a_watched_client_is_not_asked_while_it_stays(
    pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wakeups, "CLIENT_CHECK_SECONDS", 0.01)
    _, server = pair
    watched = _CountedClient(server)
    thread, result, _ = _wait_in_thread(watched, wait_seconds=0.5)

    thread.join(5)

    assert result == [None]
    assert watched.asked == 0


def test_a_publication_still_wakes_a_watched_call(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    _, server = pair
    watched = _CountedClient(server)
    thread, result, looks = _wait_in_thread(watched, wait_seconds=0.5)

    wakeups.wake_publish(["inbox:t"])
    thread.join(5)

    assert result == [None]
    assert looks[0] >= 2
    assert watched.asked >= 1  # asked before it looks again, as every woken call is


def test_a_client_that_hung_up_after_sending_more_is_asked_not_looked_for_again(
    pair: tuple[socket.socket, socket.socket], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pipelined request before the hang-up keeps the client there (``client_gone``
    says no), and every new watch would report the hang-up again: the call falls back to
    asking rather than look at the database in a loop."""
    monkeypatch.setattr(wakeups, "CLIENT_CHECK_SECONDS", 0.05)
    client, server = pair
    client.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
    client.shutdown(socket.SHUT_WR)
    watched = _CountedClient(server)
    thread, result, looks = _wait_in_thread(watched, wait_seconds=0.5)

    thread.join(5)

    assert result == [None]
    assert looks == [2]  # the first look, and one after the hang-up woke it
    assert watched.asked >= 2  # then asked every CLIENT_CHECK_SECONDS instead
