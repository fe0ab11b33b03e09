"""``manage.py housekeeping``: what ``ai-memory serve`` runs every hour, once, now."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from messaging.housekeeping import housekeeping_run


class Command(BaseCommand):
    help = (
        "Forget retry ids past their window, store expired messages as such and, with "
        "AI_MEMORY_RETENTION_DAYS, purge what the server no longer keeps: what "
        "`ai-memory serve` runs every hour."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        housekeeping_run()
