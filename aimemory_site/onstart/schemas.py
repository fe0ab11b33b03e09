"""Request and answer shapes of the on-start routes: the session start, the session wake,
the hook block and the briefing."""

from __future__ import annotations

from typing import Annotated

from ninja import Field, Schema
from pydantic import StrictBool

from aimemory_site.lib.api import BodyIn, NameText, SessionIdText, WholeNumber
from aimemory_site.lib.limits import WAIT_SECONDS_MAX
from aimemory_site.lib.session_sources import SESSION_SOURCES
from projects.schemas import HandoffOut

# Documented, not validated here: the on-start service answers an unknown value with 400
# ``invalid_source``, as other bad values get a 400 with their own code, never a 422.
SourceText = Annotated[
    str,
    Field(
        description="What started the session, as the hook says; absent means startup.",
        json_schema_extra={"enum": list(SESSION_SOURCES)},
    ),
]
SessionIdQuery = Annotated[
    str,
    Field(
        description="The starting session's id (at most 200 characters); without one, "
        "nothing is claimed.",
        json_schema_extra={"maxLength": 200},
    ),
]


class SessionStartIn(BodyIn):
    workspace: NameText
    project: NameText
    session_id: SessionIdText
    agent: str | None = None
    # A strict boolean: the document says boolean, so 0, 1 or "yes" are refused, not
    # guessed at.
    inject_brief: StrictBool = False
    source: SourceText | None = None


class OnStartOut(Schema):
    workspace: str
    project: str
    session_id: str
    context: str = Field(
        description="The on-start block as text; it always ends with the scope line."
    )
    handoff: HandoffOut | None = Field(None, description="The handoff this call claimed.")
    brief: str | None = Field(None, description="The compiled brief, when asked for.")
    pending_message_count: int


class SessionWaitIn(BodyIn):
    workspace: NameText
    project: NameText
    session_id: SessionIdText = Field(
        description="A session id this caller registered with POST /api/v1/sessions."
    )
    wait_seconds: WholeNumber | None = Field(
        None,
        description=f"Wait up to this many seconds for new mail (clamped to "
        f"0..{WAIT_SECONDS_MAX}; 0, the default, answers at once).",
    )


class SessionWaitOut(Schema):
    new_message_count: int = Field(
        description="Pending messages this session had not been told about (now it has)."
    )
    pending_message_count: int
    context: str | None = Field(
        description="The inbox notice for all pending mail when new_message_count > 0."
    )
    superseded: bool = Field(
        description="A newer wait of the same session ended this one; stop waiting."
    )


class BriefingScopeOut(Schema):
    workspace: str
    project: str
    resolved_by: str


class BriefingOut(Schema):
    scope: BriefingScopeOut
    pending_message_count: int
    brief: str | None
    hint: str | None = Field(None, description="Present when the project was inferred.")
