"""Cross-project messages: claim-once inbox entries addressed to a project."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone

from aimemory_site.lib.agents import AGENT_OTHER
from aimemory_site.lib.ids import uuid7
from aimemory_site.lib.sql import db_value
from projects.models import AgentSession, Project


class MessageQuerySet(models.QuerySet["Message"]):
    """The one spelling of "pending in this inbox, oldest first" for every reader (the raw
    statements read ``PENDING_IN_INBOX_SQL``, below, which says the same)."""

    def pending(self, now: datetime | None = None) -> MessageQuerySet:
        """Pending and not expired at ``now`` (default: this moment): what may be listed,
        counted, claimed or cancelled. A message whose ``expires_at`` has passed is
        expired at once, whether or not ``messages_expire`` has stored it so yet."""
        return self.filter(state=Message.State.PENDING).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=now or timezone.now())
        )

    def inbox_of(self, project: Project | models.OuterRef) -> MessageQuerySet:
        """``project``: a project, or ``OuterRef("pk")`` of an outer ``Project`` query."""
        # django-stubs types a lookup's value as a model or key; Django takes expressions.
        return self.filter(to_project=project)  # type: ignore[misc]

    def outbox_of(self, project: Project) -> MessageQuerySet:
        return self.filter(from_project=project)

    def oldest_first(self) -> MessageQuerySet:
        """Delivery order (docs/reference.md#messages): ``created_at``, then the time-ordered id."""
        return self.order_by("created_at", "id")


class Message(models.Model):
    class State(models.TextChoices):
        PENDING = "pending", "pending"
        CLAIMED = "claimed", "claimed"
        CANCELLED = "cancelled", "cancelled"
        # Stored by ``messages_expire`` in the background, for rows whose time passed while
        # pending; ``state_at`` says it from the time alone before that.
        EXPIRED = "expired", "expired"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # No index of their own on the foreign keys below: each leads one of Meta.indexes,
    # and every index is written on every send and claim.
    to_project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="inbox_messages", db_index=False
    )
    from_project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="outbox_messages", db_index=False
    )
    from_agent = models.CharField(max_length=40, default=AGENT_OTHER)
    # Empty when unknown (anonymous, unnamed root); the JSON shows null then.
    from_owner_user = models.CharField(max_length=150, blank=True)
    from_session = models.ForeignKey(
        AgentSession,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    subject = models.CharField(max_length=200, blank=True)
    body = models.TextField()
    # The message this one answers (docs/reference.md#status-replies-and-retries); a plain id, checked at send.
    in_reply_to = models.UUIDField(null=True, blank=True)
    # The decision convention read once, at send (docs/reference.md#operator-decisions): parsing a body
    # on every list would let a sender slow a reader's listing.
    decision = models.JSONField(null=True, blank=True)
    decision_reply = models.JSONField(null=True, blank=True)
    # What the send did to the text, so a replayed send can say it again.
    omitted_chars = models.PositiveIntegerField(default=0)
    redactions = models.PositiveIntegerField(default=0)
    # The sender's retry key: the same key from the same principal and project within 24
    # hours is the same send. Cleared after 24 hours by ``retry_ids_purge``, so a key can
    # come back. NULL, not "", for none: the unique constraint below must only see real
    # keys.
    idempotency_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    # Whose key it is (``Principal.key``): on an open project every user signs as the
    # project, and one user's key must neither swallow another's send nor answer him with
    # a message he never sent. Set with the key and cleared with it; NULL otherwise.
    idempotency_principal = models.CharField(  # noqa: DJ001
        max_length=64, null=True, blank=True
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by_session = models.ForeignKey(
        AgentSession,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        db_index=False,
    )
    claimed_by_agent = models.CharField(max_length=40, blank=True)
    claimed_by_user = models.CharField(max_length=150, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    # When a pending message stops being deliverable (docs/reference.md#messages); None:
    # never. Set at send, never changed.
    expires_at = models.DateTimeField(null=True, blank=True)

    objects = MessageQuerySet.as_manager()

    class Meta:
        indexes = [
            # ``expires_at`` last: whether a pending message still counts is read from the
            # index alone, so the bounded send's count of up to 256 and the claim's search
            # for the oldest never visit the rows themselves.
            models.Index(
                fields=["to_project", "state", "created_at", "id", "expires_at"],
                name="message_inbox",
            ),
            models.Index(
                fields=["from_project", "state", "created_at", "id", "expires_at"],
                name="message_outbox",
            ),
            # For a deleted session's SET NULL only; most messages have no session, and a
            # partial index spares their inserts and claims the write.
            models.Index(
                fields=["from_session"],
                condition=models.Q(from_session__isnull=False),
                name="message_from_session",
            ),
            models.Index(
                fields=["claimed_by_session"],
                condition=models.Q(claimed_by_session__isnull=False),
                name="message_claimed_by_session",
            ),
            # What the background expiry looks for: only sends with an expiry write it,
            # and a claim takes the row out of it.
            models.Index(
                fields=["expires_at"],
                condition=models.Q(state="pending", expires_at__isnull=False),
                name="message_expiring",
            ),
            # The pending questions (docs/reference.md#waiting-on-you), which a signed-in
            # viewer's home page and its live region read every second: without it, a scan
            # of every message ever kept. Only a question's send and its end write it.
            models.Index(
                fields=["created_at"],
                condition=models.Q(state="pending", decision__isnull=False),
                name="message_pending_question",
            ),
            # What a thread walks down (docs/reference.md#search-and-threads): the
            # answers of a message. Only a reply's send writes it.
            models.Index(
                fields=["in_reply_to"],
                condition=models.Q(in_reply_to__isnull=False),
                name="message_reply",
            ),
            # What the retention purge walks, oldest first: a send writes nothing to it;
            # the claim, cancel or expiry that finishes a message adds it.
            models.Index(
                fields=["created_at", "id"],
                condition=~models.Q(state="pending"),
                name="message_finished",
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=["pending", "claimed", "cancelled", "expired"]),
                name="message_state_valid",
            ),
            # Decides racing retries of one send: the second insert fails, nothing doubles.
            models.UniqueConstraint(
                fields=["from_project", "idempotency_key", "idempotency_principal"],
                condition=models.Q(idempotency_key__isnull=False),
                name="message_idempotency_key_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.state})"

    def is_pending(self, now: datetime | None = None) -> bool:
        """Whether the message may still be claimed or cancelled at ``now`` (default:
        this moment), as ``MessageQuerySet.pending`` says it."""
        return self.state_at(now or timezone.now()) == Message.State.PENDING

    def state_at(self, now: datetime) -> str:
        """The state every surface shows at ``now``: a pending message whose expiry has
        passed is ``expired``, stored so or not."""
        if (
            self.state == Message.State.PENDING
            and self.expires_at is not None
            and self.expires_at <= now
        ):
            return Message.State.EXPIRED
        return self.state


def _column(name: str) -> str:
    field = Message._meta.get_field(name)
    assert isinstance(field, models.Field)
    return field.column


# ``Message.objects.inbox_of(project).pending(now)`` in raw SQL, for the statements the
# ORM cannot say (the bounded send's count, the pop's claim): a condition on the message
# table, unaliased, whose parameters are ``pending_in_inbox_params(project_id, now)``.
PENDING_IN_INBOX_SQL = (
    f"{_column('to_project')} = %s AND {_column('state')} = %s "
    f"AND ({_column('expires_at')} IS NULL OR {_column('expires_at')} > %s)"
)


def pending_in_inbox_params(project_id: Any, now: datetime) -> list[Any]:
    """The parameters of ``PENDING_IN_INBOX_SQL`` for the inbox of ``project_id`` at
    ``now``, as the current connection stores them."""
    return [
        db_value(Message, "to_project", project_id),
        Message.State.PENDING,
        db_value(Message, "expires_at", now),
    ]


class PopRequest(models.Model):
    """What one pop with a ``request_id`` claimed (or that it claimed nothing), kept for
    24 hours so that a retry of it by the same principal answers the same and claims
    nothing new."""

    inbox = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    # Who popped (``Principal.key``): another user's pop of a shared inbox with the same
    # id is a pop of its own, never handed the body this one claimed.
    principal_key = models.CharField(max_length=64)
    request_id = models.CharField(max_length=200)
    message = models.ForeignKey(
        Message, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["inbox", "request_id", "principal_key"], name="pop_request_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.request_id} -> {self.message_id}"


class Announcement(models.Model):
    """A pending message that a session has been told about: by its session start's inbox
    notice or by a session wake (docs/reference.md#waiting-and-waking). A message is
    announced to a session at most once, so a wake answers only for mail it has not told.

    One row per (session, message), not a watermark of the newest announced id: ids are
    time-ordered at creation, but two sends may commit out of id order, and a watermark
    past a message that committed later would never announce it. The rows are written by
    one ``INSERT ... SELECT`` of the pending ids that skips those already there, so two
    racing announcements to one session tell each message once (the unique constraint
    decides), whatever the commit order of the sends. They go with their session or
    message (cascade), and are never read for anything but this.
    """

    # No index of its own: it leads the unique constraint's.
    session = models.ForeignKey(
        AgentSession, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    # Indexed: deleting a message looks up its rows here.
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="+")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["session", "message"], name="announcement_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.session_id} told of {self.message_id}"


class SessionWait(models.Model):
    """The newest session wake of a session: a wait whose token is no longer this one has
    been superseded (docs/reference.md#waiting-and-waking). In the database, not in a
    process, so that a wait parked in one worker learns of a newer one in another.

    ``project`` and ``parked_until`` say, to every process and host, that a session of
    that project is parked in a wait: a wake webhook of the project is not called then
    (docs/reference.md#wake-webhooks). Set when the wait starts, to its end plus a
    grace (a waiter parks again within it); brought back to now plus the grace when it
    ends; a wait whose process died stops counting by itself."""

    session = models.OneToOneField(
        AgentSession, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    token = models.UUIDField()
    # Indexed (a foreign key's index): a webhook's wake asks for the project's parked waits.
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    parked_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.session_id}: {self.token}"


class NotificationTarget(models.Model):
    """Where a person is told of a question (docs/reference.md#notifications): an Apprise
    URL (``ntfy://``, ``mailto://``, ``json://``, ...). The URL is a credential: it is
    shown masked, never in full, once saved."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_targets"
    )
    url = models.TextField()
    label = models.CharField(max_length=100, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Failed attempts in a row; the fifth disables the target, saying why.
    failures = models.PositiveIntegerField(default=0)
    disabled_reason = models.CharField(max_length=500, blank=True)

    def __str__(self) -> str:
        return f"{self.user} {self.label or self.pk}"


class NotificationDelivery(models.Model):
    """One notification of one event of a question to one target: made once (its
    ``destination`` is unique per question and event), claimed before each attempt with
    a guarded update, so no restart or second host sends it twice."""

    class Event(models.TextChoices):
        ARRIVAL = "arrival", "arrival"
        REMINDER = "reminder", "reminder"
        DEADLINE = "deadline", "deadline"

    class State(models.TextChoices):
        PENDING = "pending", "pending"
        SENT = "sent", "sent"
        FAILED = "failed", "failed"

    id = models.BigAutoField(primary_key=True)
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="deliveries")
    # A user's target; null for a server-wide one (AI_MEMORY_NOTIFY_URLS).
    target = models.ForeignKey(
        NotificationTarget, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    # ``target:<id>``, or ``server:<digest of the URL>`` for a server-wide target.
    destination = models.CharField(max_length=80)
    event = models.CharField(max_length=16, choices=Event.choices)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Set while an attempt is in flight; an attempt is made only by whoever set it.
    claimed_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "notification deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["message", "event", "destination"], name="delivery_once_per_event"
            ),
            models.CheckConstraint(
                condition=models.Q(state__in=["pending", "sent", "failed"]),
                name="delivery_state_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.event} of {self.message_id} to {self.destination}"


class WakeWebhook(models.Model):
    """A URL the server POSTs to when mail arrives for a project that has no session to
    wake (docs/reference.md#wake-webhooks): a cloud routine, a CI job, a bot. ``secret``
    is the HMAC key of a ``generic`` webhook, the bearer token of a ``claude-routine``
    one: a credential, never shown once saved.

    The debounce and the one wake at a time are these columns, decided by guarded
    updates (``messaging.wake_webhooks``) so every process and host agrees: a send sets
    ``wake_due_at`` only where it is null (and queues the one task), the task's claim
    clears it and opens the quiet window (``quiet_until``)."""

    class Dialect(models.TextChoices):
        GENERIC = "generic", "generic"
        CLAUDE_ROUTINE = "claude-routine", "claude-routine"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="wake_webhooks")
    url = models.TextField()
    dialect = models.CharField(max_length=20, choices=Dialect.choices, default=Dialect.GENERIC)
    secret = models.CharField(max_length=500)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Failed attempts in a row; the fifth disables the webhook, saying why.
    failures = models.PositiveIntegerField(default=0)
    disabled_reason = models.CharField(max_length=500, blank=True)
    # A wake is queued for this moment (its task exists); null: none is.
    wake_due_at = models.DateTimeField(null=True, blank=True)
    # No new wake is made before this: the debounce window of the last one.
    quiet_until = models.DateTimeField(null=True, blank=True)
    # Mail created up to here was told (by a wake, or to a parked session): a wake's
    # ``new_message_count`` counts what came after.
    told_until = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_sent_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(dialect__in=["generic", "claude-routine"]),
                name="wake_webhook_dialect_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.dialect} webhook {self.pk} of {self.project}"
