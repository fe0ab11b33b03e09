"""The server's housekeeping (docs/reference.md#expiry-and-retention): retry ids past their window,
expired messages stored as such, notification attempts whose worker stopped marked
failed, wake webhooks' wakes whose task is gone queued again, and with
``AI_MEMORY_RETENTION_DAYS`` the finished messages and handoffs older than that
(``messaging.retention``).

``ai-memory serve`` has its background worker run it at start and every
``HOUSEKEEPING_EVERY_SECONDS``, off every request's path (the ``housekeeping_hourly``
task, below); ``ai-memory manage housekeeping`` runs it once, now. Every step is
idempotent, so two processes that run it at once delete nothing twice.
"""

from __future__ import annotations

import logging
import random
from datetime import timedelta
from typing import Any

from django.db import connections
from django.db.models import QuerySet
from django.utils import timezone
from django_tasks import TaskContext, TaskResultStatus, task
from django_tasks_db.models import DBTaskResult

from messaging.notifications import deliveries_abandon
from messaging.retention import housekeeping as retention_housekeeping
from messaging.retention import retry_ids_purge
from messaging.tasks import wakes_requeue_overdue

logger = logging.getLogger(__name__)

#: How often the background worker runs the housekeeping.
HOUSEKEEPING_EVERY_SECONDS = 3600.0


def housekeeping_run() -> None:
    """Run the housekeeping once; a failure is logged, and the next run tries again.
    Lets go of its own database connections after."""
    try:
        retry_ids_purge()
        retention_housekeeping()
        deliveries_abandon()
        wakes_requeue_overdue()
    except Exception:
        logger.exception("the housekeeping failed (the next run tries again)")
    finally:
        connections.close_all()


@task(takes_context=True)
def housekeeping_hourly(context: TaskContext) -> None:
    """The housekeeping, then the next run in an hour (give or take a tenth); when hosts
    started together queued two runs, the one that finds another queued ends the chain."""
    housekeeping_run()
    others = housekeeping_queued().exclude(id=context.task_result.id)
    if not others.exists():
        housekeeping_hourly.using(run_after=timezone.now() + _housekeeping_interval()).enqueue()


def _housekeeping_interval() -> timedelta:
    return timedelta(seconds=HOUSEKEEPING_EVERY_SECONDS * random.uniform(0.9, 1.1))


def housekeeping_queued() -> QuerySet[DBTaskResult[Any, Any]]:
    """The housekeeping runs queued and not started, due or not."""
    return DBTaskResult.objects.filter(
        task_path=housekeeping_hourly.module_path, status=TaskResultStatus.READY
    )


def housekeeping_schedule() -> None:
    """Queue a housekeeping run now, unless one is due already (``ai-memory serve`` at
    start: a server that was down an hour catches up at once)."""
    if not DBTaskResult.objects.ready().filter(task_path=housekeeping_hourly.module_path).exists():
        housekeeping_hourly.enqueue()
