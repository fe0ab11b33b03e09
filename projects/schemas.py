from __future__ import annotations

from typing import Annotated

from ninja import Field, Schema
from pydantic import StrictBool

from aimemory_site.lib.api import BodyIn, NameText, NonBlankText, PagePathText, SessionIdText
from aimemory_site.lib.session_sources import SESSION_SOURCES

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
    # Strict booleans here and below: the document says boolean, so 0, 1 or "yes" are
    # refused, not guessed at.
    inject_brief: StrictBool = False
    source: SourceText | None = None


class HandoffOut(Schema):
    id: str
    body: str
    created_at: str
    expires_at: str
    from_agent: str
    from_owner_user: str | None


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


class BriefingScopeOut(Schema):
    workspace: str
    project: str
    resolved_by: str


class BriefingOut(Schema):
    scope: BriefingScopeOut
    pending_message_count: int
    brief: str | None
    hint: str | None = Field(None, description="Present when the project was inferred.")


class HandoffCreateIn(BodyIn):
    workspace: NameText
    project: NameText
    body: NonBlankText = Field(
        description="What was done, open questions, next steps; 8,000 chars kept."
    )


class HandoffCreateOut(Schema):
    handoff_id: str


class HandoffRowOut(Schema):
    id: str
    state: str
    created_at: str
    expires_at: str
    claimed_at: str | None
    from_agent: str
    chars: int


class HandoffListOut(Schema):
    handoffs: list[HandoffRowOut]


class PageWriteIn(BodyIn):
    workspace: NameText
    project: NameText
    path: PagePathText
    body: NonBlankText = Field(description="Markdown; scrubbed, at most 16,000 chars kept.")
    pinned: StrictBool = False


class PageWriteOut(Schema):
    path: str
    created: bool


class PageRowOut(Schema):
    path: str
    pinned: bool
    updated_at: str
    chars: int


class PageListOut(Schema):
    pages: list[PageRowOut]


class PageOut(Schema):
    path: str
    body: str
    pinned: bool
    updated_at: str
    updated_by_agent: str
    updated_by_user: str | None


class PageReadOut(Schema):
    page: PageOut
