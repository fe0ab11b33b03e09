from __future__ import annotations

from ninja import Field, Schema
from pydantic import StrictBool

from aimemory_site.lib.api import BodyIn, NameText, NonBlankText, PagePathText


class HandoffOut(Schema):
    id: str
    body: str
    created_at: str
    expires_at: str
    from_agent: str
    from_owner_user: str | None


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
    # Strict: the document says boolean, so 0, 1 or "yes" are refused, not guessed at.
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
