"""gunicorn's configuration for ``ai-memory serve`` (``-c python:<this module>``): its
documented settings and server hooks, nothing else (docs/serving.md)."""

from __future__ import annotations

import signal
from typing import Any

import gevent

worker_class = "gevent"


def post_worker_init(worker: Any) -> None:
    """In each worker, once the application is loaded: the cross-process wake transport,
    and SIGTERM answering every parked call at once."""
    from aimemory_site.lib import wakeups
    from aimemory_site.lib.wake_transport import transport_install

    transport_install()
    stop = signal.getsignal(signal.SIGTERM)

    def terminated(signum: int, frame: Any) -> None:
        # A signal handler may run inside the event loop, which must not block: the
        # wake-up runs in a greenlet of its own.
        gevent.spawn(wakeups.wake_shutdown)
        if callable(stop):
            stop(signum, frame)

    signal.signal(signal.SIGTERM, terminated)


def worker_exit(server: Any, worker: Any) -> None:
    from aimemory_site.lib import wakeups

    wakeups.wake_shutdown()
