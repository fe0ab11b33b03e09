"""Wake webhooks (docs/reference.md#wake-webhooks): mail for a project with no session to
wake (a cloud routine, a CI job, a bot) calls a URL, at most once per debounce window
(``AI_MEMORY_WAKE_DEBOUNCE``), and only while no session of the project is parked in a
session wait. What is sent is counts (``generic``, HMAC-signed) or the inbox notice
(``claude-routine``): never a body, a subject or a message id.

The state lives on the webhook's row, so every process and host agrees, and it changes
only by guarded updates, the claim-once way a pop takes a message:

- A send whose statement saw an enabled webhook of its recipient with no wake queued
  (``wake_due_at`` null) calls ``wake_due_set`` after its commit: one ``UPDATE ... WHERE
  wake_due_at IS NULL`` sets it to the end of the quiet window (or now) and, in the same
  transaction, the wake's task is queued for then. However many sends race, one sets
  it: one task a webhook at a time, however great the flood.
- The task claims the wake (``wake_claim``: ``wake_due_at`` back to null, the quiet
  window opened), then counts and POSTs. A send that commits after the claim queues the
  next wake, due at the window's end; one that committed before it is counted.
- A failed POST queues the same wake again after 5, 15, 30 and 60 s, as notifications
  are retried (``retry_due``); the fifth failure in a row disables the webhook, saying
  why.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from aimemory_site.lib.sql import db_value
from aimemory_site.lib.webhook_post import webhook_post
from messaging.models import Message, SessionWait, WakeWebhook
from messaging.notices import inbox_notice
from messaging.notifications import FAILURES_THAT_DISABLE, disabled_reason, retry_due
from projects.models import Project

logger = logging.getLogger(__name__)

Dialect = WakeWebhook.Dialect

SIGNATURE_HEADER = "X-AI-Memory-Signature"
#: Seconds a POST may take, connect and answer; past it, it failed.
POST_TIMEOUT = 10.0
#: The most of an answer that is read (and dropped: only the status decides).
ANSWER_MAX_BYTES = 64 * 1024
#: A session wait counts as parked this long after it ends: a waiter parks again within it.
PARKED_GRACE = timedelta(seconds=5)
#: A wake's task finds its wake due within this much of its own clock.
DUE_SLACK = timedelta(seconds=1)
#: A wake this overdue lost its task (a queue row deleted by hand): the housekeeping
#: queues it again.
OVERDUE_AFTER = timedelta(minutes=5)
#: The beta header the routine fire endpoint requires.
ROUTINE_BETA = "experimental-cc-routine-2026-04-01"
ROUTINE_API_VERSION = "2023-06-01"


# --- URLs and secrets ------------------------------------------------------------------


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def wake_url_refusal(url: str) -> str | None:
    """Why ``url`` is no wake webhook URL (one line), or None: ``https://`` with a host,
    or ``http://`` on a loopback address when ``AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS`` is on."""
    try:
        parsed = urlsplit(url.strip())
        host = parsed.hostname or ""
        parsed.port  # noqa: B018  # raises ValueError for a port out of range
    except ValueError:
        return "the URL does not parse"
    if parsed.scheme == "https" and host:
        return None
    if parsed.scheme == "http" and host and _loopback(host):
        if settings.AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS:
            return None
        return (
            "an http:// URL is accepted only on loopback and only with "
            "AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS=1 on the server; use https://"
        )
    return "a wake webhook URL must be https:// (http:// only on loopback, with AI_MEMORY_ALLOW_LOOPBACK_WEBHOOKS=1)"


def wake_url_shown(url: str) -> str:
    """``url`` as lists show it: no password, no query (either may carry a credential)."""
    parsed = urlsplit(url.strip())
    netloc = parsed.hostname or ""
    if ":" in netloc:
        netloc = f"[{netloc}]"
    if parsed.port is not None:
        netloc += f":{parsed.port}"
    if parsed.username:
        netloc = f"{parsed.username}:****@{netloc}" if parsed.password else f"****@{netloc}"
    query = "?****" if parsed.query else ""
    return f"{parsed.scheme}://{netloc}{parsed.path}{query}"


def wake_secret_new() -> str:
    """A generic webhook's signing secret: 256 random bits, URL-safe."""
    return "whsec_" + secrets.token_urlsafe(32)


def wake_webhook_add(
    *, project: Project, url: str, dialect: str = Dialect.GENERIC, token: str | None = None
) -> WakeWebhook:
    """Save a wake webhook of ``project``, enabled: a ``generic`` one with a new secret
    (``wake_secret_new``), a ``claude-routine`` one with ``token`` as its bearer.
    ValueError, saying why in one line, for a URL ``wake_url_refusal`` refuses, an
    unknown dialect, a routine without a token or a generic webhook given one (nothing
    is saved)."""
    if dialect not in Dialect.values:
        raise ValueError(f"unknown dialect {dialect!r}: generic or claude-routine")
    refusal = wake_url_refusal(url) or wake_token_refusal(dialect, token)
    if refusal is not None:
        raise ValueError(refusal)
    return WakeWebhook.objects.create(
        project=project,
        url=url.strip(),
        dialect=dialect,
        secret=wake_secret_for(dialect, token),
    )


def wake_token_refusal(dialect: str, token: str | None) -> str | None:
    """Why ``token`` does not suit a webhook of ``dialect``, in one line; None when it
    does: a ``claude-routine`` needs its routine's bearer, a ``generic`` one signs with
    a secret the server makes."""
    token = (token or "").strip()
    if dialect == Dialect.CLAUDE_ROUTINE and not token:
        return "a claude-routine webhook needs --token: the routine's bearer token"
    if dialect == Dialect.GENERIC and token:
        return (
            "a generic webhook signs with a secret the server makes; --token is for claude-routine"
        )
    return None


def wake_secret_for(dialect: str, token: str | None) -> str:
    """What a new webhook of ``dialect`` keeps as its secret: the routine's bearer, or a
    new signing secret (``wake_secret_new``)."""
    return (token or "").strip() if dialect == Dialect.CLAUDE_ROUTINE else wake_secret_new()


def wake_webhook_enabled_again(webhook: WakeWebhook) -> None:
    """Set ``webhook`` (not saved) as a webhook enabled again by hand is: a fresh start,
    its failures and their reason forgotten, no wake left queued."""
    webhook.enabled = True
    webhook.failures = 0
    webhook.disabled_reason = ""
    webhook.wake_due_at = None


def wake_webhook_line(webhook: WakeWebhook) -> str:
    """One line for ``wake_list``: id, project, dialect, the URL without credentials,
    and the state. Never the secret."""
    state = "enabled" if webhook.enabled else f"disabled: {webhook.disabled_reason or 'by hand'}"
    return "\t".join(
        [
            str(webhook.pk),
            f"{webhook.project.workspace.name}/{webhook.project.name}",
            webhook.dialect,
            wake_url_shown(webhook.url),
            state,
        ]
    )


# --- the send's side -------------------------------------------------------------------


def wake_needed_sql() -> str:
    """A condition, with one parameter (the project's id), true when the project has an
    enabled wake webhook with no wake queued: what a send's statement asks, so a send to
    a project without one costs an index probe and no round trip of its own."""
    table = WakeWebhook._meta.db_table
    project = WakeWebhook._meta.get_field("project").column
    return (
        f"EXISTS (SELECT 1 FROM {table} WHERE {project} = %s AND enabled = %s "
        "AND wake_due_at IS NULL)"
    )


def wake_needed_params(project_id: uuid.UUID) -> list[Any]:
    return [
        db_value(WakeWebhook, "project", project_id),
        db_value(WakeWebhook, "enabled", True),
    ]


def wake_due_set(project_id: uuid.UUID, now: datetime) -> list[tuple[int, datetime]]:
    """Queue a wake of every enabled webhook of ``project_id`` that has none queued: due
    at the end of its quiet window, or now. One guarded update decides, so racing sends
    set each once; returns (webhook id, due) of those this caller set, whose tasks the
    caller queues in the same transaction (``messaging.tasks.wake_schedule``)."""
    table = WakeWebhook._meta.db_table
    project = WakeWebhook._meta.get_field("project").column
    at = db_value(WakeWebhook, "wake_due_at", now)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET wake_due_at = CASE WHEN quiet_until IS NOT NULL "
            "AND quiet_until > %s THEN quiet_until ELSE %s END "
            f"WHERE {project} = %s AND enabled = %s AND wake_due_at IS NULL RETURNING id",
            [at, at, *wake_needed_params(project_id)],
        )
        ids = [row[0] for row in cursor.fetchall()]
    if not ids:
        return []
    rows = WakeWebhook.objects.filter(pk__in=ids).values_list("id", "wake_due_at")
    return [(webhook_id, due or now) for webhook_id, due in rows]


# --- the wake --------------------------------------------------------------------------


def session_parked(project_id: uuid.UUID, now: datetime) -> bool:
    """Whether a session of ``project_id`` is parked in a session wait now, in any process
    or host (``SessionWait.parked_until``)."""
    return SessionWait.objects.filter(project_id=project_id, parked_until__gt=now).exists()


def wake_claim(webhook_id: int, now: datetime) -> bool:
    """Take webhook ``webhook_id``'s queued wake, if it is due (within ``DUE_SLACK``) and
    the webhook enabled, in one guarded update that clears it and opens the quiet window;
    whether this caller took it. On PostgreSQL the claim first takes the recipient's row
    lock, as a send does, so every send either committed before it (and is counted) or
    sees the wake taken (and queues the next)."""
    table = WakeWebhook._meta.db_table
    project = WakeWebhook._meta.get_field("project").column
    quiet = now + timedelta(seconds=settings.AI_MEMORY_WAKE_DEBOUNCE)
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                f"SELECT 1 FROM {Project._meta.db_table} WHERE id = "
                f"(SELECT {project} FROM {table} WHERE id = %s) FOR NO KEY UPDATE",
                [webhook_id],
            )
        cursor.execute(
            f"UPDATE {table} SET wake_due_at = NULL, quiet_until = %s "
            "WHERE id = %s AND enabled = %s AND wake_due_at IS NOT NULL "
            "AND wake_due_at <= %s RETURNING id",
            [
                db_value(WakeWebhook, "quiet_until", quiet),
                webhook_id,
                db_value(WakeWebhook, "enabled", True),
                db_value(WakeWebhook, "wake_due_at", now + DUE_SLACK),
            ],
        )
        return cursor.fetchone() is not None


@dataclass(frozen=True)
class Counts:
    pending: int
    new: int


def wake_counts(webhook: WakeWebhook, now: datetime) -> Counts:
    """The project's pending mail, and how much of it came since the last wake told."""
    pending = Message.objects.pending(now).inbox_of(webhook.project)
    new = (
        pending if webhook.told_until is None else pending.filter(created_at__gt=webhook.told_until)
    )
    return Counts(pending=pending.count(), new=new.count())


def wake_request(webhook: WakeWebhook, counts: Counts) -> tuple[bytes, dict[str, str]]:
    """The body and headers of ``webhook``'s POST: counts, or the inbox notice; never a
    body, a subject or a message id."""
    project = webhook.project
    workspace = project.workspace.name
    if webhook.dialect == Dialect.CLAUDE_ROUTINE:
        text = inbox_notice(count=counts.pending, workspace=workspace, project=project.name)
        body = json.dumps({"text": text}).encode()
        return body, {
            "Content-Type": "application/json",
            "Authorization": f"Bearer {webhook.secret}",
            "anthropic-beta": ROUTINE_BETA,
            "anthropic-version": ROUTINE_API_VERSION,
        }
    body = json.dumps(
        {
            "event": "mail",
            "workspace": workspace,
            "project": project.name,
            "pending_message_count": counts.pending,
            "new_message_count": counts.new,
        }
    ).encode()
    return body, {
        "Content-Type": "application/json",
        SIGNATURE_HEADER: wake_signature(webhook.secret, body),
    }


def wake_signature(secret: str, body: bytes) -> str:
    """``sha256=<hex HMAC-SHA256 of body keyed with the secret's UTF-8 bytes>``."""
    return "sha256=" + hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()


def wake_post(webhook: WakeWebhook, body: bytes, headers: dict[str, str]) -> str | None:
    """POST one wake; None when answered 2xx, else why not (one line, never the secret).
    No redirect is followed; at most ``POST_TIMEOUT`` seconds."""
    refusal = wake_url_refusal(webhook.url)
    if refusal is not None:
        return f"the URL is not accepted now: {refusal}"
    error = webhook_post(
        webhook.url,
        body,
        headers={"User-Agent": "ai-memory", **headers},
        timeout=POST_TIMEOUT,
        timed_out=f"no answer within {POST_TIMEOUT:g} s",
        max_bytes=ANSWER_MAX_BYTES,
    )
    if error is None:
        return None
    return error.replace(webhook.secret, "****")[:400] if webhook.secret else error[:400]


def wake_attempt(webhook_id: int, requeue: Callable[[datetime], object]) -> str:
    """Make webhook ``webhook_id``'s queued wake, if this caller claims it: nothing while
    a session of the project is parked or when no mail came since the last wake told;
    else one POST, and what came of it recorded. A failure calls ``requeue(at)`` (which
    queues this wake's task again) in the transaction that records it, unless it was the
    fifth in a row, which disables the webhook. Says what it did, in a word, for tests
    and logs. Must not run inside ``transaction.atomic``: the claim commits first."""
    now = timezone.now()
    if not wake_claim(webhook_id, now):
        return "not claimed"
    webhook = WakeWebhook.objects.select_related("project__workspace").get(pk=webhook_id)
    rows = WakeWebhook.objects.filter(pk=webhook_id)
    if session_parked(webhook.project_id, now):
        rows.update(told_until=now)  # the parked session is told by its wait
        return "parked"
    counts = wake_counts(webhook, now)
    if not counts.new:
        return "nothing new"
    body, headers = wake_request(webhook, counts)
    error = wake_post(webhook, body, headers)
    done = timezone.now()
    if error is None:
        rows.update(
            told_until=now, last_attempt_at=done, last_sent_at=done, last_error="", failures=0
        )
        return "sent"
    failures = webhook.failures + 1
    with transaction.atomic():
        if failures >= FAILURES_THAT_DISABLE:
            rows.update(
                failures=failures,
                last_attempt_at=done,
                last_error=error,
                enabled=False,
                disabled_reason=disabled_reason(error),
                wake_due_at=None,
            )
            logger.warning("wake webhook %s disabled: %s", webhook_id, error)
            return "disabled"
        retry_at = retry_due(failures, done) or done
        rows.update(failures=failures, last_attempt_at=done, last_error=error)
        # Queued again unless a send queued a wake meanwhile: then the sooner of the two.
        queued = rows.filter(wake_due_at__isnull=True).update(wake_due_at=retry_at)
        if not queued:
            rows.filter(wake_due_at__gt=retry_at).update(wake_due_at=retry_at)
        requeue(retry_at)
    return "failed"


def wakes_overdue(now: datetime | None = None) -> list[tuple[int, datetime]]:
    """Enabled webhooks whose queued wake is ``OVERDUE_AFTER`` past due: its task is gone
    (a queue row deleted by hand). The housekeeping queues them again."""
    cutoff = (now or timezone.now()) - OVERDUE_AFTER
    overdue = WakeWebhook.objects.filter(enabled=True, wake_due_at__lt=cutoff)
    return [
        (webhook_id, due or cutoff) for webhook_id, due in overdue.values_list("id", "wake_due_at")
    ]
