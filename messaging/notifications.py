"""Telling people of a question where they are (docs/reference.md#notifications).

A question that arrives, one 80% of the way to its deadline with no accepted answer, and
one whose deadline passed are each told, once, to every enabled target of every user who
may answer it and to the server-wide targets (``AI_MEMORY_NOTIFY_URLS``). Apprise
delivers; nothing here speaks a service's protocol. Everything here runs in the
background worker (``messaging.tasks``), never in a request.

Once per (question, event, target): ``deliveries_make`` inserts the rows with a unique
constraint, and every attempt first claims its row with a guarded update
(``deliveries_claim``), the way a pop claims a message, so a second worker, host or run
finds nothing to send. An attempt whose worker died before it recorded the outcome is
not made again: the housekeeping marks it failed (``deliveries_abandon``), since the
notification may have gone out.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import apprise
from django.conf import settings
from django.db import connection, connections, transaction
from django.db.models import F
from django.utils import timezone

from aimemory_site.lib.decisions import deadline_text
from aimemory_site.lib.sql import db_value, placeholders
from messaging import answer_links
from messaging.answer_links import LINKS_NEED_PUBLIC_URL, answer_page_url
from messaging.answer_selectors import (
    decision_of,
    question_deadline,
    question_fallback,
    users_who_may_answer,
)
from messaging.models import Message, NotificationDelivery, NotificationTarget
from projects.auth import auth_enabled

if TYPE_CHECKING:
    from django.contrib.auth.models import User

logger = logging.getLogger(__name__)

Event = NotificationDelivery.Event

#: Seconds after a failed attempt before the next: five attempts in all.
RETRY_DELAYS = (5, 15, 30, 60)
#: Failed attempts in a row, across questions, that disable a target.
FAILURES_THAT_DISABLE = 5
#: Seconds Apprise waits to connect and then to read (its ``cto`` and ``rto``).
SOCKET_TIMEOUT = 4.0
#: The most an attempt may take, whatever the service does: past it, it failed.
ATTEMPT_TIMEOUT = 12.0
#: An attempt claimed longer ago than this lost its worker.
ABANDONED_AFTER = timedelta(minutes=5)
#: How many targets of one event are told at once.
PARALLEL_ATTEMPTS = 8
#: How much of a question's ``details`` a notification carries.
DETAILS_MAX_CHARS = 500


# --- URLs ------------------------------------------------------------------------------


def _plugin(url: str) -> apprise.plugins.NotifyBase | None:
    """Apprise's notifier for ``url``, or None when Apprise cannot parse it."""
    try:
        return apprise.Apprise.instantiate(url.strip(), suppress_exceptions=True) or None
    except Exception:  # a plugin that raises on a malformed URL is as unparsable
        return None


def notify_url_refusal(url: str) -> str | None:
    """Why ``url`` is no notification target (one line), or None when Apprise parses it."""
    if not url.strip():
        return "the URL is empty"
    if _plugin(url) is None:
        return (
            "Apprise cannot parse this URL; see https://github.com/caronc/apprise/wiki "
            "for each service's form (ntfy://topic, mailto://user:pass@host, json://host/path)"
        )
    return None


def notify_url_masked(url: str) -> str:
    """``url`` with every password, token and key masked, as Apprise masks them."""
    plugin = _plugin(url)
    if plugin is None:
        return "(unparsable URL)"
    return str(plugin.url(privacy=True))  # type: ignore[no-untyped-call]  # Apprise is untyped


def server_notify_urls(raw: str | None = None) -> list[str]:
    """The server-wide targets: ``AI_MEMORY_NOTIFY_URLS`` split at spaces and commas."""
    text = settings.AI_MEMORY_NOTIFY_URLS if raw is None else raw
    return [part for part in text.replace(",", " ").split() if part]


# --- who is told -----------------------------------------------------------------------


@dataclass(frozen=True)
class Destination:
    """Where one notification goes: a user's target, or a server-wide URL."""

    key: str  # NotificationDelivery.destination
    target: NotificationTarget | None
    url: str

    @property
    def user(self) -> User | None:
        return self.target.user if self.target is not None else None


def _server_destination(url: str) -> Destination:
    digest = hashlib.sha256(url.encode()).hexdigest()[:40]
    return Destination(key=f"server:{digest}", target=None, url=url)


def question_destinations(question: Message) -> list[Destination]:
    """Every enabled target of every user who may answer ``question`` (the rule of
    ``answer_refusal``, asked of them all at once: ``users_who_may_answer``), then the
    server-wide targets. On an anonymous server only the latter. At most four queries,
    however many targets. Precondition: ``question`` is a question, with ``to_project__workspace``."""
    destinations = []
    if auth_enabled():
        targets = list(
            NotificationTarget.objects.filter(enabled=True, user__is_active=True)
            .select_related("user")
            .order_by("user_id", "id")
        )
        users = list({target.user_id: target.user for target in targets}.values())
        allowed = {user.pk for user in users_who_may_answer(users, question.to_project, question)}
        destinations = [
            Destination(key=f"target:{target.pk}", target=target, url=target.url)
            for target in targets
            if target.user_id in allowed
        ]
    destinations.extend(_server_destination(url) for url in server_notify_urls())
    return destinations


# --- what it says ----------------------------------------------------------------------


def notification_compose(
    question: Message, event: str, user: User | None, *, outcome: str = ""
) -> tuple[str, str]:
    """The title and body of ``event`` of ``question``, for ``user`` (answer links are
    theirs) or a server-wide target (``user`` None: the answer page only). The text is
    the question's own, scrubbed at send; no token and no target URL goes in.
    Precondition: ``question`` comes with ``to_project`` and ``from_project`` and their
    workspaces."""
    decision = decision_of(question)
    prefix = "reminder" if event == Event.REMINDER else "decision"
    title = f"{prefix}: {' '.join(decision['question'].split())}"
    lines = []
    if outcome:
        lines += [outcome, ""]
    lines.append(decision["question"])
    lines.append("")
    for option in decision["options"]:
        line = f"- {option['label']} ({option['id']})"
        if option.get("description"):
            line += f": {option['description']}"
        if option.get("recommended"):
            line += " (recommended)"
        lines.append(line)
    details = decision.get("details")
    if details:
        cut = details if len(details) <= DETAILS_MAX_CHARS else details[:DETAILS_MAX_CHARS] + "…"
        lines += ["", cut]
    asker = question.from_project
    lines += ["", f"Asked by {asker.workspace.name}/{asker.name}."]
    deadline = question_deadline(question)
    if deadline is not None:
        fallback = question_fallback(question)
        lines.append(
            f"Deadline: {deadline_text(deadline)}"
            + (f"; then the asker's fallback {fallback} is taken." if fallback else ".")
        )
    page = answer_page_url(question)
    if page is None:
        lines += ["", f"No answer links here: {LINKS_NEED_PUBLIC_URL}."]
    elif event != Event.DEADLINE:
        if user is not None:
            lines.append("")
            for option in decision["options"]:
                link = answer_links.answer_link_url(question, option["id"], user)
                if link is not None:
                    lines.append(f"Answer {option['label']}: {link}")
        lines += ["", f"Answer page: {page}"]
    return title, "\n".join(lines)


# --- delivering ------------------------------------------------------------------------


class _ThreadErrors(logging.Handler):
    """Apprise says why a notification failed only in its log: collect what each
    attempt's thread logs at WARNING or above, for its delivery row."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.by_thread: dict[int, list[str]] = {}
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self._lock:
            errors = self.by_thread.get(record.thread or 0)
            if errors is not None:
                errors.append(record.getMessage())

    def collect(self, thread: int) -> None:
        with self._lock:
            self.by_thread[thread] = []

    def take(self, thread: int) -> list[str]:
        with self._lock:
            return self.by_thread.pop(thread, [])


_errors = _ThreadErrors()
logging.getLogger("apprise").addHandler(_errors)


def apprise_send(url: str, title: str, body: str) -> str | None:
    """Send one notification through Apprise; None when it went, else why not (one
    line, never the URL). Takes at most ``ATTEMPT_TIMEOUT`` seconds."""
    plugin = _plugin(url)
    if plugin is None:
        return "Apprise cannot parse this target's URL"
    plugin.socket_connect_timeout = SOCKET_TIMEOUT
    plugin.socket_read_timeout = SOCKET_TIMEOUT
    outcome: list[bool] = []
    errors: list[str] = []

    def send() -> None:
        _errors.collect(threading.get_ident())
        try:
            outcome.append(bool(plugin.notify(body=body, title=title)))
        except Exception as exc:  # a plugin's bug is this target's failure
            outcome.append(False)
            errors.append(type(exc).__name__)
        finally:
            errors.extend(_errors.take(threading.get_ident()))

    sender = threading.Thread(target=send, name="notification", daemon=True)
    sender.start()
    sender.join(ATTEMPT_TIMEOUT)
    if sender.is_alive():
        return f"no answer within {ATTEMPT_TIMEOUT:g} s"
    if outcome == [True]:
        return None
    said = "; ".join(dict.fromkeys(errors))[:400] or "the service refused it"
    # Apprise's own lines may name the host, never the credentials: mask the URL anyway.
    return said.replace(url, notify_url_masked(url))


def deliveries_make(question: Message, event: str) -> list[int]:
    """The rows of ``event`` of ``question``, one per destination, made once however
    often this runs (a conflicting insert is skipped); the ids of those still pending and
    unclaimed."""
    destinations = question_destinations(question)
    NotificationDelivery.objects.bulk_create(
        [
            NotificationDelivery(message=question, target=d.target, destination=d.key, event=event)
            for d in destinations
        ],
        ignore_conflicts=True,
    )
    return list(
        NotificationDelivery.objects.filter(
            message=question,
            event=event,
            state=NotificationDelivery.State.PENDING,
            claimed_at__isnull=True,
            attempts=0,
        ).values_list("id", flat=True)
    )


def deliveries_claim(delivery_ids: list[int], now: datetime) -> list[int]:
    """Claim deliveries ``delivery_ids`` for one attempt each, in one guarded statement:
    the ids this caller's ``UPDATE ... WHERE state = 'pending' AND claimed_at IS NULL``
    changed (another worker's claim, or a delivery sent or failed already, is left out)."""
    if not delivery_ids:
        return []
    table = NotificationDelivery._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET claimed_at = %s, attempts = attempts + 1 "
            f"WHERE id IN ({placeholders(len(delivery_ids))}) AND state = %s "
            "AND claimed_at IS NULL RETURNING id",
            [
                db_value(NotificationDelivery, "claimed_at", now),
                *delivery_ids,
                NotificationDelivery.State.PENDING,
            ],
        )
        return [row[0] for row in cursor.fetchall()]


@dataclass(frozen=True)
class Attempted:
    """What an attempt came to: sent, failed for good, or to be tried again at ``retry_at``."""

    delivery_id: int
    state: str
    retry_at: datetime | None = None


def delivery_attempt(delivery_id: int, *, outcome: str = "") -> Attempted | None:
    """``deliveries_attempt`` of one delivery: what came of it, or None when this caller
    did not claim it."""
    done = deliveries_attempt([delivery_id], outcome=outcome)
    return done[0] if done else None


def deliveries_attempt(delivery_ids: list[int], *, outcome: str = "") -> list[Attempted]:
    """Make one attempt at each of ``delivery_ids`` that this caller claims, and record
    what came of each: sent; or failed, with the target's run of failures counted (the
    fifth disables it, saying why) and, while attempts remain and the target is enabled,
    a retry due after ``RETRY_DELAYS``. ``outcome`` opens a deadline's notification.

    The services are called at once, ``PARALLEL_ATTEMPTS`` at a time, so a slow or failing
    target holds up no other; the database sees three writes however many targets: the
    claim, then the outcomes in one transaction (on SQLite every write waits for the one
    before it, a send's too). Must not run inside ``transaction.atomic``: the claim must
    commit before any service is called."""
    claimed = deliveries_claim(delivery_ids, timezone.now())
    deliveries = list(
        NotificationDelivery.objects.select_related(
            "target__user",
            "message__to_project__workspace",
            "message__from_project__workspace",
        ).filter(pk__in=claimed)
    )
    if not deliveries:
        return []

    def attempt(delivery: NotificationDelivery) -> str | None:
        try:
            destination = _destination_of(delivery)
            if destination is None:
                return "the server-wide target is no longer configured"
            title, body = notification_compose(
                delivery.message, delivery.event, destination.user, outcome=outcome
            )
            return apprise_send(destination.url, title, body)
        except Exception:
            logger.exception("notification delivery %s failed unexpectedly", delivery.pk)
            return "the server failed to make this notification (see its log)"
        finally:
            connections.close_all()  # this thread's, if composing read anything

    with ThreadPoolExecutor(min(PARALLEL_ATTEMPTS, len(deliveries))) as pool:
        errors = list(pool.map(attempt, deliveries))
    with transaction.atomic():
        return [
            _delivery_record(delivery, error)
            for delivery, error in zip(deliveries, errors, strict=True)
        ]


def _destination_of(delivery: NotificationDelivery) -> Destination | None:
    if delivery.target is not None:
        target = delivery.target
        return Destination(key=delivery.destination, target=target, url=target.url)
    for url in server_notify_urls():
        destination = _server_destination(url)
        if destination.key == delivery.destination:
            return destination
    return None


def _delivery_record(delivery: NotificationDelivery, error: str | None) -> Attempted:
    """Record one attempt's outcome. Must run inside ``transaction.atomic`` (with the
    others of its batch)."""
    now = timezone.now()
    rows = NotificationDelivery.objects.filter(pk=delivery.pk)
    target = delivery.target
    if error is None:
        rows.update(state=NotificationDelivery.State.SENT, sent_at=now, last_error="")
        if target is not None and target.failures:
            NotificationTarget.objects.filter(pk=target.pk).update(failures=0)
        return Attempted(delivery.pk, NotificationDelivery.State.SENT)
    still_enabled = True
    if target is not None:
        NotificationTarget.objects.filter(pk=target.pk).update(failures=F("failures") + 1)
        still_enabled = not target_disable_if_failing(target.pk, error)
    retry_at = retry_due(delivery.attempts, now)
    if retry_at is not None and still_enabled:
        rows.update(last_error=error, claimed_at=None)
        return Attempted(delivery.pk, NotificationDelivery.State.PENDING, retry_at)
    rows.update(state=NotificationDelivery.State.FAILED, last_error=error)
    return Attempted(delivery.pk, NotificationDelivery.State.FAILED)


def retry_due(attempts: int, now: datetime) -> datetime | None:
    """When the next attempt is due after ``attempts`` failed ones in a row (after 5, 15,
    30 and 60 s: ``RETRY_DELAYS``), or None when that was the last. Notifications and
    wake webhooks (``messaging.wake_webhooks``) retry by it."""
    if not 1 <= attempts <= len(RETRY_DELAYS):
        return None
    return now + timedelta(seconds=RETRY_DELAYS[attempts - 1])


def disabled_reason(error: str) -> str:
    """Why a target or webhook whose last ``FAILURES_THAT_DISABLE`` attempts all failed
    is disabled, ``error`` being the last one's failure."""
    return f"disabled after {FAILURES_THAT_DISABLE} failed attempts in a row; the last: {error}"[
        :500
    ]


def target_disable_if_failing(target_id: int, error: str) -> bool:
    """Disable target ``target_id`` when its last ``FAILURES_THAT_DISABLE`` attempts all
    failed, with ``error`` in its reason; whether it is disabled now."""
    reason = disabled_reason(error)
    NotificationTarget.objects.filter(
        pk=target_id, enabled=True, failures__gte=FAILURES_THAT_DISABLE
    ).update(enabled=False, disabled_reason=reason)
    return not NotificationTarget.objects.filter(pk=target_id, enabled=True).exists()


def deliveries_abandon(now: datetime | None = None) -> int:
    """Mark failed every attempt claimed more than ``ABANDONED_AFTER`` ago: its worker
    stopped before it recorded the outcome, and the notification may have gone, so it is
    never sent again. How many."""
    cutoff = (now or timezone.now()) - ABANDONED_AFTER
    return NotificationDelivery.objects.filter(
        state=NotificationDelivery.State.PENDING, claimed_at__lt=cutoff
    ).update(
        state=NotificationDelivery.State.FAILED,
        last_error="the worker stopped during this attempt; not sent again, as it may have gone",
    )


def question_of(message_id: uuid.UUID | str) -> Message | None:
    """The question ``message_id`` with what notifications and the deadline read, or None."""
    return (
        Message.objects.select_related("to_project__workspace", "from_project__workspace")
        .filter(pk=message_id, decision__isnull=False)
        .first()
    )


# --- targets ---------------------------------------------------------------------------


def notification_target_add(*, user: User, url: str, label: str = "") -> NotificationTarget:
    """Save ``url`` as a target of ``user``'s, enabled; ValueError, saying why in one
    line, for a URL Apprise cannot parse (nothing is saved)."""
    refusal = notify_url_refusal(url)
    if refusal is not None:
        raise ValueError(refusal)
    return NotificationTarget.objects.create(user=user, url=url.strip(), label=label.strip())


def notification_target_test(target: NotificationTarget) -> str | None:
    """Send ``target`` a test notification now; None when it went, else why not. A
    success enables a target the failures disabled, and clears its count."""
    error = apprise_send(
        target.url,
        "ai-memory: test notification",
        f"This target ({target.label or target.pk}) of {target.user.get_username()} works: "
        "questions that they may answer will arrive here.",
    )
    if error is None:
        NotificationTarget.objects.filter(pk=target.pk).update(
            enabled=True, failures=0, disabled_reason=""
        )
    return error


def notification_target_line(target: NotificationTarget) -> str:
    """One line for ``notify_list``: id, user, label, the masked URL, and the state."""
    state = "enabled" if target.enabled else f"disabled: {target.disabled_reason or 'by hand'}"
    return "\t".join(
        [
            str(target.pk),
            target.user.get_username(),
            target.label or "-",
            notify_url_masked(target.url),
            state,
        ]
    )
