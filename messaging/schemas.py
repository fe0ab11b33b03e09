from __future__ import annotations

from ninja import Field, Schema
from pydantic import ConfigDict


class MessageSendIn(Schema):
    model_config = ConfigDict(extra="forbid")

    to_workspace: str
    to_project: str
    from_workspace: str
    from_project: str
    subject: str | None = Field(None, description="One line; at most 200 characters kept.")
    body: str = Field(
        description="A self-contained request: the recipient cannot see your project. "
        "Secrets are scrubbed; at most 8,000 characters are kept."
    )


class MessageSendOut(Schema):
    message_id: str


class MessageOut(Schema):
    id: str
    state: str
    to_workspace: str
    to_project: str
    to_workspace_id: str
    to_project_id: str
    from_workspace: str
    from_project: str
    from_workspace_id: str
    from_project_id: str
    from_agent: str
    from_owner_user: str | None
    subject: str | None
    body: str
    created_at: str
    claimed_at: str | None


class MessageListOut(Schema):
    messages: list[MessageOut]


class MessagePopIn(Schema):
    model_config = ConfigDict(extra="forbid")

    workspace: str
    project: str
    message_id: str | None = None


class MessagePopOut(Schema):
    message: MessageOut | None
    security_notice: str | None = Field(
        None, description="Present exactly when a message was claimed."
    )


class MessageCancelIn(Schema):
    model_config = ConfigDict(extra="forbid")

    workspace: str
    project: str
    message_id: str | None = None
    all: bool = False


class MessageCancelOut(Schema):
    cancelled: int
