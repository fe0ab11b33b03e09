"""gunicorn's configuration for ``ai-memory serve`` (``--config python:<this module>``): its
documented settings and server hooks (docs/serving.md).

gunicorn's master process loads this module and the worker class, and must not load
Django: the gevent worker patches the standard library as it starts, and whatever was
made before with the unpatched one (Django's per-thread connections, above all) would
be shared by every greenlet. So the hooks import the application's modules when they
run, in the worker, and the module itself imports only ``lib.wait_caps`` and
``serving.task_worker`` (the background worker's keeper), which need no Django.
"""

from __future__ import annotations

import os
import signal
from typing import Any

import gevent

from aimemory_site.lib import wait_caps
from aimemory_site.serving.task_worker import TaskWorkerKeeper

# Each greenlet of gevent's otherwise keeps the stack it was spawned from and its
# spawning tree, for debugging tools the server does not use: memory every connection,
# a parked call's included, would hold for nothing (docs/serving.md).
gevent.config.track_greenlet_tree = False

worker_class = "aimemory_site.serving.worker.Worker"
#: Database connections a worker holds open at once (``lib.db_spares``): its greenlets
#: may start any number of requests, and without a bound a burst of them would open a
#: connection each, past PostgreSQL's ``max_connections``. Past it a request waits for
#: one within its database budget. The bench's 32 clients on three PostgreSQL workers
#: keep about ten busy in each.
OPEN_CONNECTIONS_PER_WORKER = 12
# Longer request lines reach the application, which refuses them in the route's own
# kind of answer (``serving.wsgi.REQUEST_LINE_MAX_BYTES``).
limit_request_line = 0


def on_starting(server: Any) -> None:
    """In the master, before any worker is forked: the host's counts of parked calls,
    shared by every worker (``lib.wait_caps``)."""
    wait_caps.counts_make(*wait_caps.limits_from_environment(os.environ))


_task_worker = TaskWorkerKeeper()


def when_ready(server: Any) -> None:
    """In the master, once it listens: the background worker (``serving.task_worker``)."""
    _task_worker.start()


def on_exit(server: Any) -> None:
    """In the master, as the server stops: the background worker stops too."""
    _task_worker.stop()


def post_worker_init(worker: Any) -> None:
    """In each worker, once the application is loaded: the bound on its database
    connections, the cross-process wake transport, and SIGTERM answering every parked
    call at once."""
    from aimemory_site.lib import db_spares, wakeups
    from aimemory_site.lib.wake_transport import transport_install

    db_spares.open_limit_set(OPEN_CONNECTIONS_PER_WORKER)
    transport_install()
    stop = signal.getsignal(signal.SIGTERM)

    def terminated(signum: int, frame: Any) -> None:
        # Every parked call answers as if its time were up, then the worker stops as
        # gunicorn stops it: it takes no new connection and waits for the answers. A
        # signal handler may run inside the event loop, which must not block, so the
        # wake-up runs in a greenlet of its own.
        gevent.spawn(wakeups.wake_shutdown)
        if callable(stop):
            stop(signum, frame)

    signal.signal(signal.SIGTERM, terminated)


def worker_exit(server: Any, worker: Any) -> None:
    """However a worker stops (its master gone, a restart), no call stays parked."""
    from aimemory_site.lib import wakeups

    wakeups.wake_shutdown()
