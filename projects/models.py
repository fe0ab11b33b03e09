"""Workspaces, projects, access (tokens and grants), agent sessions and activity."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils import timezone

from aimemory_site.lib.agents import AGENT_OTHER
from aimemory_site.lib.ids import uuid7
from aimemory_site.lib.names import NAME_PATTERN, NAME_RULE

name_validator = RegexValidator(NAME_PATTERN, NAME_RULE[0].upper() + NAME_RULE[1:] + ".")


class Workspace(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    name = models.CharField(max_length=100, unique=True, validators=[name_validator])
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Project(models.Model):
    class AccessMode(models.TextChoices):
        OPEN = "open", "open: every authenticated user reads and writes"
        RESTRICTED = "restricted", "restricted: root, the creator and grant holders"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="projects")
    name = models.CharField(max_length=100, validators=[name_validator])
    access_mode = models.CharField(
        max_length=16, choices=AccessMode.choices, default=AccessMode.OPEN
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="created_projects",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["workspace__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["workspace", "name"], name="project_unique_name"),
            models.CheckConstraint(
                condition=models.Q(access_mode__in=["open", "restricted"]),
                name="project_access_mode_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workspace.name}/{self.name}"


class Grant(models.Model):
    class Level(models.TextChoices):
        READ = "read", "read"
        WRITE = "write", "write"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="project_grants"
    )
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="grants")
    level = models.CharField(max_length=8, choices=Level.choices)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "project"], name="grant_unique_user_project"),
            models.CheckConstraint(
                condition=models.Q(level__in=["read", "write"]), name="grant_level_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.level} {self.project}"


class ApiToken(models.Model):
    """A user's bearer token. The key is shown once; only its keyed hash is stored."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=16, editable=False)
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class AgentSession(models.Model):
    """A lifecycle-hook session: the source of ``session`` scope and of the shared slot."""

    session_id = models.CharField(max_length=200, unique=True)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="sessions")
    agent = models.CharField(max_length=40, default=AGENT_OTHER)
    # The principal that registered the session id (``Principal.key``): only it may use
    # the id, so nobody can move or act through another caller's session.
    principal_key = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField(default=timezone.now)
    last_seen_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        verbose_name = "agent session"

    def __str__(self) -> str:
        return f"{self.session_id} ({self.agent})"


class ServerBoot(models.Model):
    """One row per ``ai-memory serve`` start.

    The shared slot only counts sessions published since the latest boot; kept in the
    database so every worker process and host agrees on it.
    """

    started_at = models.DateTimeField(default=timezone.now, db_index=True)

    def __str__(self) -> str:
        return f"boot at {self.started_at.isoformat()}"


class Activity(models.Model):
    """A project's Recent Activity entry. Metadata only: never a message body."""

    class Kind(models.TextChoices):
        SESSION_STARTED = "session_started", "session started"
        PROJECT_CREATED = "project_created", "project created"
        MESSAGE_SENT = "message_sent", "message sent"
        MESSAGE_RECEIVED = "message_received", "message received"
        MESSAGE_CLAIMED = "message_claimed", "message claimed"
        MESSAGE_CANCELLED = "message_cancelled", "message cancelled"
        HANDOFF_WRITTEN = "handoff_written", "handoff written"
        HANDOFF_CLAIMED = "handoff_claimed", "handoff claimed"
        PAGE_WRITTEN = "page_written", "page written"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # Indexed by activity_recent, which it leads (an index of its own would be one more
    # write per activity row: two go with every send, one with every claim).
    project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="activities", db_index=False
    )
    kind = models.CharField(max_length=32, choices=Kind.choices)
    actor = models.CharField(max_length=200, blank=True)
    summary = models.CharField(max_length=300)
    # The other side of a message (recipient of a send, sender of a receipt). Kept as a
    # link, not in the summary text, so the web can redact it for viewers who may not
    # read that project.
    counterpart = models.ForeignKey(
        Project, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", db_index=False
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "activities"
        indexes = [
            models.Index(fields=["project", "-created_at"], name="activity_recent"),
            # For a deleted project's SET NULL only: handoff and page rows have none.
            models.Index(
                fields=["counterpart"],
                condition=models.Q(counterpart__isnull=False),
                name="activity_counterpart",
            ),
        ]

    def __str__(self) -> str:
        return self.summary


class Handoff(models.Model):
    """A single-use note from one session to the next one in the same project."""

    class State(models.TextChoices):
        OPEN = "open", "open"
        CLAIMED = "claimed", "claimed"
        EXPIRED = "expired", "expired"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="handoffs")
    body = models.TextField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by_session = models.ForeignKey(
        AgentSession, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    from_session = models.ForeignKey(
        AgentSession, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    from_agent = models.CharField(max_length=40, default=AGENT_OTHER)
    from_owner_user = models.CharField(max_length=150, blank=True)

    class Meta:
        indexes = [
            models.Index(fields=["project", "state", "created_at", "id"], name="handoff_next"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=["open", "claimed", "expired"]),
                name="handoff_state_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.state})"


class Page(models.Model):
    """Project knowledge at a path. Never mail: never listed, counted or announced as one."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="pages")
    path = models.CharField(max_length=200)
    body = models.TextField()
    pinned = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)
    updated_by_agent = models.CharField(max_length=40, default=AGENT_OTHER)
    updated_by_user = models.CharField(max_length=150, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project", "path"], name="page_unique_path"),
        ]

    def __str__(self) -> str:
        return self.path


class RateWindow(models.Model):
    """How many requests one caller made in one fixed window (``projects.rate_limits``).

    In the database, not in process memory, so every worker process and every host on
    the same database counts against the same limit.
    """

    # "t:" and the bearer's keyed hash, or "a:" and the client address; never a raw token.
    key = models.CharField(max_length=80)
    # Unix time, in whole seconds, at which the window starts.
    window_start = models.BigIntegerField()
    count = models.PositiveIntegerField(default=1)

    class Meta:
        constraints = [
            # The target of the counting statement's ON CONFLICT (key, window_start).
            models.UniqueConstraint(fields=["key", "window_start"], name="ratewindow_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.key} at {self.window_start}: {self.count}"
