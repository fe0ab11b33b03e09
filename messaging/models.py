"""Cross-project messages: claim-once inbox entries addressed to a project."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from aimemory_site.lib.agents import AGENT_OTHER
from aimemory_site.lib.ids import uuid7
from projects.models import AgentSession, Project


class MessageQuerySet(models.QuerySet["Message"]):
    """The one spelling of "pending in this inbox, oldest first" for every reader."""

    def pending(self) -> MessageQuerySet:
        return self.filter(state=Message.State.PENDING)

    def inbox_of(self, project: Project) -> MessageQuerySet:
        return self.filter(to_project=project)

    def outbox_of(self, project: Project) -> MessageQuerySet:
        return self.filter(from_project=project)

    def oldest_first(self) -> MessageQuerySet:
        """Delivery order (DESIGN.md section 5): ``created_at``, then the time-ordered id."""
        return self.order_by("created_at", "id")


class Message(models.Model):
    class State(models.TextChoices):
        PENDING = "pending", "pending"
        CLAIMED = "claimed", "claimed"
        CANCELLED = "cancelled", "cancelled"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    to_project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="inbox_messages")
    from_project = models.ForeignKey(
        Project, on_delete=models.CASCADE, related_name="outbox_messages"
    )
    from_agent = models.CharField(max_length=40, default=AGENT_OTHER)
    # Empty when unknown (anonymous, unnamed root); the JSON shows null then.
    from_owner_user = models.CharField(max_length=150, blank=True)
    from_session = models.ForeignKey(
        AgentSession, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    subject = models.CharField(max_length=200, blank=True)
    body = models.TextField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    created_at = models.DateTimeField(default=timezone.now)
    claimed_at = models.DateTimeField(null=True, blank=True)
    claimed_by_session = models.ForeignKey(
        AgentSession, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    claimed_by_agent = models.CharField(max_length=40, blank=True)
    claimed_by_user = models.CharField(max_length=150, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)

    objects = MessageQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["to_project", "state", "created_at", "id"], name="message_inbox"),
            models.Index(
                fields=["from_project", "state", "created_at", "id"], name="message_outbox"
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=["pending", "claimed", "cancelled"]),
                name="message_state_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.state})"
