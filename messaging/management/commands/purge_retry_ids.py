"""``manage.py purge_retry_ids``: forget send keys and pop request ids past 24 hours."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand

from messaging.retention import retry_ids_purge


class Command(BaseCommand):
    help = (
        "Forget idempotency keys of sends and request ids of pops older than 24 hours, so "
        "they can be used again. ai-memory serve also does this at start and now and then."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        keys, requests = retry_ids_purge()
        self.stdout.write(f"cleared {keys} send keys, deleted {requests} pop request ids")
