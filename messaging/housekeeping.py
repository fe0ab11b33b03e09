"""The server's housekeeping (docs/reference.md#expiry-and-retention): retry ids past their window,
expired messages stored as such, and with ``AI_MEMORY_RETENTION_DAYS`` the finished
messages and handoffs older than that (``messaging.retention``).

``ai-memory serve`` runs it in each worker process, at start and every
``HOUSEKEEPING_EVERY_SECONDS``, off every request's path (``housekeeping_loop``); a
deployment that runs its processes another way runs ``ai-memory manage housekeeping``
from its scheduler. Every step is idempotent, so two processes that run it at once
delete nothing twice.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable

from django.db import connections

from messaging.retention import housekeeping
from messaging.services import retry_ids_purge

logger = logging.getLogger(__name__)

#: How often each worker runs the housekeeping.
HOUSEKEEPING_EVERY_SECONDS = 3600.0


def housekeeping_run() -> None:
    """Run the housekeeping once; a failure is logged, and the next run tries again.
    Lets go of its own database connections after."""
    try:
        retry_ids_purge()
        housekeeping()
    except Exception:
        logger.exception("the housekeeping failed (the next run tries again)")
    finally:
        connections.close_all()


def housekeeping_loop(sleep: Callable[[float], object]) -> None:
    """Run the housekeeping now, then every ``HOUSEKEEPING_EVERY_SECONDS`` (give or take
    a tenth, so that the workers of a server do not all run it at once), for ever:
    ``sleep`` is the process's (gevent's, in a worker)."""
    while True:
        housekeeping_run()
        sleep(HOUSEKEEPING_EVERY_SECONDS * random.uniform(0.9, 1.1))
