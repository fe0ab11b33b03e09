"""Whether a parked call's client is still there (``lib.wakeups.WatchableClient``)."""

from __future__ import annotations

import socket
from collections.abc import Callable

import gevent

_PEEK = int(socket.MSG_PEEK | socket.MSG_DONTWAIT)
_READ = 1  # libev's EV_READ


def client_gone(sock: socket.socket) -> bool:
    """Whether the peer of ``sock`` has closed the connection (or it broke), without
    reading anything: a pending end of stream peeks as empty. A client that has sent
    more (its next request) is still there.

    Never waits: with a timeout, gevent's socket waits for data when there is none, so
    the peek runs with none (nothing else reads the socket of a parked call)."""
    try:
        timeout = sock.gettimeout()
        sock.settimeout(0.0)
        try:
            return sock.recv(1, _PEEK) == b""
        finally:
            sock.settimeout(timeout)
    except BlockingIOError:
        return False
    except (OSError, ValueError):
        return True


class WatchedClient:
    """``client_gone`` of one request's socket, which a parked call can also have
    watched: the event loop calls its ``wake`` when the socket turns readable, which a
    hang-up does, so a parked call need not wake every second to ask.

    Readable is not always gone: a client that sent its next request (pipelining) is
    still there, and its socket stays readable. Such a client is watched no more (the
    call then asks once a second) rather than waking its call in a loop."""

    __slots__ = ("pipelined", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.pipelined = False

    def __call__(self) -> bool:
        return client_gone(self.sock)

    def watch(self, wake: Callable[[], object]) -> Callable[[], object] | None:
        if self.pipelined:
            return None
        try:
            fd = self.sock.fileno()
        except (OSError, ValueError):
            wake()
            return None
        watcher = gevent.get_hub().loop.io(fd, _READ)

        def readable() -> None:
            watcher.stop()
            if not client_gone(self.sock):
                self.pipelined = True
            wake()

        watcher.start(readable)
        stop: Callable[[], object] = watcher.stop
        return stop
