"""The server's housekeeping (docs/reference.md#expiry-and-retention): retry ids past their window,
expired messages stored as such, notification attempts whose worker stopped marked
failed, and with ``AI_MEMORY_RETENTION_DAYS`` the finished
messages and handoffs older than that (``messaging.retention``).

``ai-memory serve`` has its background worker run it at start and every
``HOUSEKEEPING_EVERY_SECONDS``, off every request's path (the ``housekeeping`` task of
``messaging.tasks``); ``ai-memory manage housekeeping`` runs it once, now. Every step is
idempotent, so two processes that run it at once delete nothing twice.
"""

from __future__ import annotations

import logging

from django.db import connections

from messaging.notifications import deliveries_abandon
from messaging.retention import housekeeping
from messaging.services import retry_ids_purge

logger = logging.getLogger(__name__)

#: How often the background worker runs the housekeeping.
HOUSEKEEPING_EVERY_SECONDS = 3600.0


def housekeeping_run() -> None:
    """Run the housekeeping once; a failure is logged, and the next run tries again.
    Lets go of its own database connections after."""
    try:
        retry_ids_purge()
        housekeeping()
        deliveries_abandon()
    except Exception:
        logger.exception("the housekeeping failed (the next run tries again)")
    finally:
        connections.close_all()
