"""``manage.py purge_messages --older-than-days N [--dry-run]``: delete finished messages
and handoffs now, as ``AI_MEMORY_RETENTION_DAYS`` has the server do in the background."""

from __future__ import annotations

import argparse
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from messaging.retention import PURGE_BATCH, Purged, messages_purge


def _count(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be {least} or more, got {value}")
    return value


def _days(text: str) -> int:
    return _count(text, 0)


def _batch(text: str) -> int:
    return _count(text, 1)


def _counted(count: int, noun: str) -> str:
    """``1 handoff``, ``2 handoffs``: the nouns here take an s."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def purged_text(purged: Purged, *, days: int, dry_run: bool) -> str:
    """One line: what was deleted (or would be), and how many expired messages were
    stored as expired on the way."""
    verb = "would delete" if dry_run else "deleted"
    expired = "would store" if dry_run else "stored"
    return (
        f"{verb} {_counted(purged.messages, 'message')} (with "
        f"{_counted(purged.pop_requests, 'pop request id')}) and "
        f"{_counted(purged.handoffs, 'handoff')} finished more than {_counted(days, 'day')} "
        f"ago; {expired} {_counted(purged.expired, 'expired message')} as expired"
    )


class Command(BaseCommand):
    help = (
        "Delete claimed, cancelled and expired messages (with their retry ids) and claimed "
        "and expired handoffs that finished more than N days ago, in small batches; never "
        "a pending message or a page. --dry-run only counts. With AI_MEMORY_RETENTION_DAYS "
        "the server does this in the background. Example: ai-memory manage purge_messages "
        "--older-than-days 30 --dry-run"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--older-than-days", type=_days, required=True, metavar="N")
        parser.add_argument(
            "--dry-run", action="store_true", help="count what would go; change nothing"
        )
        parser.add_argument(
            "--batch-size",
            type=_batch,
            default=PURGE_BATCH,
            metavar="ROWS",
            help=f"rows per write transaction (default {PURGE_BATCH})",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        days: int = options["older_than_days"]
        purged = messages_purge(
            older_than_days=days, batch=options["batch_size"], dry_run=options["dry_run"]
        )
        self.stdout.write(purged_text(purged, days=days, dry_run=options["dry_run"]))
