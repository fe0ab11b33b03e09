"""``ai-memory manage db_worker``: the background worker (docs/operating.md#background-work).

The database queue's own worker (``django_tasks_db``), which ``ai-memory serve`` starts
beside its web processes; run it by hand for a host of its own. It takes the place of
the backend's command of the same name (this app comes first in ``INSTALLED_APPS``) to
install the process's wake transport first: a task that sends (a deadline's fallback
answer) must wake the calls parked on it in the web processes, as a send of theirs does.
"""

from __future__ import annotations

from typing import Any

from django_tasks_db.management.commands.db_worker import Command as QueueWorkerCommand

from aimemory_site.lib.wake_transport import transport_install


class Command(QueueWorkerCommand):
    help = (
        "Run the background worker: notifications of questions, the fallback answers of "
        "deadlines, the hourly housekeeping. ai-memory serve starts one itself."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        transport_install()
        super().handle(*args, **options)
