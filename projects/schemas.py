from __future__ import annotations

from ninja import Field, Schema
from pydantic import ConfigDict


class SessionStartIn(Schema):
    model_config = ConfigDict(extra="forbid")

    workspace: str
    project: str
    session_id: str
    agent: str | None = None
    inject_brief: bool = False


class OnStartOut(Schema):
    workspace: str
    project: str
    session_id: str
    context: str = Field(description="The on-start block as text; empty when nothing to say.")
    pending_message_count: int


class BriefingScopeOut(Schema):
    workspace: str
    project: str
    resolved_by: str


class BriefingOut(Schema):
    scope: BriefingScopeOut
    pending_message_count: int
