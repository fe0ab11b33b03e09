"""Running the background worker's due tasks in the test's own process: the database
queue's real worker (``django_tasks_db``'s, as ``ai-memory manage db_worker`` runs it), in
batch mode, so it stops when nothing is due."""

from __future__ import annotations

from django.db import connections
from django.utils.crypto import get_random_string
from django_tasks_db.management.commands.db_worker import Worker


def tasks_run_due() -> None:
    """Run every task that is due now, one after another, as ``ai-memory serve``'s worker
    would. Callable from any thread (the command itself installs signal handlers, which
    only the main thread may); lets go of the thread's connections after."""
    try:
        Worker(
            queue_names=["default"],
            interval=0,
            batch=True,
            backend_name="default",
            startup_delay=False,
            max_tasks=None,
            worker_id=get_random_string(32),
            excluded_queue_names=[],
        ).run()
    finally:
        connections.close_all()
