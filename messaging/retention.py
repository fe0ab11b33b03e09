"""Expiry and retention: the housekeeping writes that run off every request's path
(docs/reference.md#messages).

Whether a message has expired is read from the time (``MessageQuerySet.pending``,
``PENDING_IN_INBOX_SQL``, ``Message.state_at``), so it holds at once on every surface;
nothing here decides it. ``messages_expire`` only stores ``expired`` on the pending rows
whose time has passed, in the background, so that they leave the inbox index and the
partial ``message_expiring`` index instead of being stepped over by every claim and
count. ``messages_purge`` deletes what ``AI_MEMORY_RETENTION_DAYS`` (or ``manage
purge_messages``) no longer keeps; ``retry_ids_purge`` forgets send keys and pop
request ids past their 24-hour window. Both work in batches, each a short write transaction
of its own, with a pause between them on SQLite, whose one write lock every send and pop
also waits for: a purge of a million rows never holds it for longer than a batch.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from aimemory_site.lib.sql import db_value, placeholders
from messaging.limits import RETRY_WINDOW
from messaging.models import Announcement, Message, NotificationDelivery, PopRequest
from projects.handoff_services import handoffs_purge

# Rows per write transaction: a few milliseconds of a write lock on either database.
PURGE_BATCH = 200
# Seconds between two batches on SQLite, at least, and how many times as long as the
# batch (and the copy of its WAL, ``_rest``) took: the writers queued on its one lock
# get it in between.
SQLITE_PAUSE_SECONDS = 0.02
SQLITE_REST_PER_BATCH_TIME = 2.0


@dataclass(frozen=True)
class Purged:
    """What a purge deleted (or, on a dry run, would delete)."""

    messages: int  # claimed, cancelled and expired messages
    pop_requests: int  # the pop request ids that pointed at them
    handoffs: int  # claimed and expired handoffs
    expired: int  # pending messages past their time, stored as expired first


def _pause_default() -> float:
    return SQLITE_PAUSE_SECONDS if connection.vendor == "sqlite" else 0.0


def _rest(pause: float, since: float) -> None:
    """Wait between two batches: ``pause`` seconds, and on SQLite (unless ``pause`` is 0,
    for tests and benches that want it at once) first copy the batch's WAL back into the
    database (``wal_finish``), then rest a multiple of what the batch and its copy took
    since ``since`` (``time.monotonic``)."""
    if pause > 0 and connection.vendor == "sqlite":
        # Deleting 200 messages rewrites pages all over every index: some 4 MiB of WAL a
        # batch. Left to the server's checkpointer, it piled up into RESTART checkpoints
        # that held every writer for 440 ms (send and pop p99 at 8 clients 1.9x and 4.3x).
        connection.wal_finish()  # type: ignore[attr-defined]  # this project's backend
        pause = max(pause, (time.monotonic() - since) * SQLITE_REST_PER_BATCH_TIME)
    if pause > 0:
        time.sleep(pause)


def messages_expire(
    *, now: datetime | None = None, batch: int = PURGE_BATCH, pause: float | None = None
) -> int:
    """Store ``expired`` on the pending messages whose ``expires_at`` is not after ``now``
    (default: this moment), ``batch`` at a time; returns how many. A claim racing it is
    decided by the state guard of each: the row stays claimed or becomes expired, once.
    Must not run inside a transaction (each batch commits on its own)."""
    now = now or timezone.now()
    pause = _pause_default() if pause is None else pause
    passed = Message.objects.filter(
        state=Message.State.PENDING, expires_at__isnull=False, expires_at__lte=now
    )
    stored = 0
    while True:
        began = time.monotonic()
        ids = list(passed.order_by("expires_at").values_list("id", flat=True)[:batch])
        if not ids:
            return stored
        stored += passed.filter(pk__in=ids).update(state=Message.State.EXPIRED)
        if len(ids) < batch:
            return stored
        _rest(pause, began)


def messages_purge(
    *,
    older_than_days: int,
    batch: int = PURGE_BATCH,
    dry_run: bool = False,
    now: datetime | None = None,
    pause: float | None = None,
) -> Purged:
    """Delete the messages that finished more than ``older_than_days`` days before ``now``
    (claimed, cancelled, or expired: by ``claimed_at``, ``cancelled_at``, ``expires_at``),
    with the pop request ids that name them, and the claimed and expired handoffs as old;
    first, stores ``expired`` on pending messages past their time (``messages_expire``).
    Never a pending message that may still be claimed, never a page. ``batch`` rows per
    short write transaction, ``pause`` seconds at least between two (default: a short
    rest on SQLite, none on PostgreSQL; 0: back to back). On a ``dry_run`` nothing
    changes and the counts say what would be deleted. Precondition: ``older_than_days >=
    0``; not inside a transaction.

    The walk follows the partial ``message_finished`` index (finished rows by
    ``created_at``, which no finished row's end precedes), keyset by keyset, so a message
    created before the cut but finished after it is stepped over once, not once a batch.
    """
    assert older_than_days >= 0
    now = now or timezone.now()
    pause = _pause_default() if pause is None else pause
    cutoff = now - timedelta(days=older_than_days)
    if dry_run:
        passed = Message.objects.filter(
            state=Message.State.PENDING, expires_at__isnull=False, expires_at__lte=now
        )
        expired = passed.count()
        # Those expired before the cut would be deleted too, once stored as expired.
        doomed_expired = passed.filter(expires_at__lt=cutoff).exclude(
            idempotency_key__isnull=False, created_at__gte=now - RETRY_WINDOW
        )
        doomed = doomed_expired.count()
        pops = PopRequest.objects.filter(message__in=doomed_expired).count()
    else:
        expired = messages_expire(now=now, batch=batch, pause=pause)
        doomed = pops = 0
    finished = Message.objects.exclude(state=Message.State.PENDING).filter(created_at__lt=cutoff)
    after: tuple[datetime, uuid.UUID] | None = None
    while True:
        began = time.monotonic()
        page = finished
        if after is not None:
            page = page.filter(created_at__gte=after[0]).exclude(
                created_at=after[0], id__lte=after[1]
            )
        rows = list(
            page.order_by("created_at", "id").values_list(
                "id", "created_at", "claimed_at", "cancelled_at", "expires_at"
            )[:batch]
        )
        if not rows:
            break
        after = (rows[-1][1], rows[-1][0])  # (created_at, id) of the last row read
        ids = [row[0] for row in rows if _finished_at(*row[1:]) < cutoff]
        if cutoff > now - RETRY_WINDOW:
            ids = _outside_retry_windows(ids, now)
        if dry_run:
            doomed += len(ids)
            pops += PopRequest.objects.filter(message_id__in=ids).count()
        elif ids:
            deleted, popped = _messages_delete(ids)
            doomed += deleted
            pops += popped
        if len(rows) < batch:
            break
        _rest(pause, began)
    handoffs = handoffs_purge(cutoff=cutoff, batch=batch, dry_run=dry_run)
    return Purged(messages=doomed, pop_requests=pops, handoffs=handoffs, expired=expired)


def _outside_retry_windows(ids: list[uuid.UUID], now: datetime) -> list[uuid.UUID]:
    """``ids`` but the messages a retry within its 24-hour window still needs: one sent
    with an idempotency key (its retry answers it again), one a pop with a request id
    claimed (its retry answers it again, and must not claim another). Whatever the
    retention, these are kept until their window has passed. Two queries."""
    window_start = now - RETRY_WINDOW
    kept = set(
        Message.objects.filter(
            pk__in=ids, idempotency_key__isnull=False, created_at__gte=window_start
        ).values_list("id", flat=True)
    )
    kept.update(
        PopRequest.objects.filter(message_id__in=ids, created_at__gte=window_start).values_list(
            "message_id", flat=True
        )
    )
    return [pk for pk in ids if pk not in kept]


def _finished_at(
    created_at: datetime,
    claimed_at: datetime | None,
    cancelled_at: datetime | None,
    expires_at: datetime | None,
) -> datetime:
    """When a finished message stopped being pending."""
    return claimed_at or cancelled_at or expires_at or created_at


def _messages_delete(ids: list[uuid.UUID]) -> tuple[int, int]:
    """Delete finished messages ``ids``, the pop request ids naming them, the record of
    their announcements to sessions and of their notifications, in one short transaction: (messages, pop request ids). Raw, as Django's cascade would first read
    every row, body and all, to look for what points at it."""
    table = Message._meta.db_table
    values = [db_value(Message, "id", pk) for pk in ids]
    with transaction.atomic():
        popped, _ = PopRequest.objects.filter(message_id__in=ids).delete()
        # What sessions were told of them: the raw delete below runs no cascade, and the
        # database's key would refuse it (at the commit, on PostgreSQL).
        Announcement.objects.filter(message_id__in=ids).delete()
        NotificationDelivery.objects.filter(message_id__in=ids).delete()
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {table} WHERE id IN ({placeholders(len(values))}) AND NOT state = %s",
                [*values, Message.State.PENDING],
            )
            deleted = cursor.rowcount
    return deleted, popped


def housekeeping() -> Purged | None:
    """What the server runs in the background now and then: store expired messages as
    such, and with ``AI_MEMORY_RETENTION_DAYS`` purge what it no longer keeps (which
    expires them first). Returns the purge's counts, or None without retention."""
    days = settings.AI_MEMORY_RETENTION_DAYS
    if days is None:
        messages_expire()
        return None
    return messages_purge(older_than_days=days)


def retry_ids_purge() -> tuple[int, int]:
    """Forget send keys and pop request ids older than the retry window.

    Returns (keys cleared, request ids deleted). Run by ``manage.py purge_retry_ids``
    and by the server's housekeeping (``messaging.housekeeping``), off every request's
    path.
    """
    cutoff = timezone.now() - RETRY_WINDOW
    keys = Message.objects.filter(idempotency_key__isnull=False, created_at__lt=cutoff).update(
        idempotency_key=None, idempotency_principal=None
    )
    requests, _ = PopRequest.objects.filter(created_at__lt=cutoff).delete()
    return keys, requests
