from __future__ import annotations

from typing import Literal

from ninja import Field, Schema
from pydantic import ConfigDict, StrictBool

from aimemory_site.lib.api import (
    BodyIn,
    NameText,
    NonBlankText,
    RetryIdText,
    UuidText,
    WholeNumber,
)
from aimemory_site.lib.durations import MESSAGE_EXPIRY_MAX_SECONDS, MESSAGE_EXPIRY_MIN_SECONDS
from aimemory_site.lib.limits import (
    LIST_LIMIT_DEFAULT,
    LIST_LIMIT_MAX,
    LIST_LIMIT_MIN,
    SEARCH_LIMIT_DEFAULT,
    SEARCH_LIMIT_MAX,
    SEARCH_QUERY_MAX_CHARS,
    SEARCH_SNIPPET_MAX_CHARS,
    WAIT_SECONDS_MAX,
)
from messaging.limits import BODY_MAX_CHARS, RETRY_ID_MAX_CHARS, SUBJECT_MAX_CHARS


class MessageSendIn(BodyIn):
    to_workspace: NameText
    to_project: NameText
    from_workspace: NameText
    from_project: NameText
    subject: str | None = Field(
        None, description=f"One line; at most {SUBJECT_MAX_CHARS} characters kept."
    )
    body: NonBlankText = Field(
        description="A self-contained request: the recipient cannot see your project. "
        f"Secrets are scrubbed; at most {BODY_MAX_CHARS:,} characters are kept."
    )
    in_reply_to: UuidText | None = Field(
        None, description="The id of a message this project sent or received, answered here."
    )
    idempotency_key: RetryIdText | None = Field(
        None,
        description=f"1-{RETRY_ID_MAX_CHARS} characters. A retry with the same key within "
        "24 hours writes nothing and answers the first send.",
    )
    # The range is documented, not validated: the service answers it with 400
    # invalid_expiry on every surface, where pydantic would answer 422.
    expires_in_seconds: WholeNumber | None = Field(
        None,
        description=f"{MESSAGE_EXPIRY_MIN_SECONDS}-{MESSAGE_EXPIRY_MAX_SECONDS:,}: the message "
        "expires this many seconds after it is sent, unclaimed (default: the server's "
        "AI_MEMORY_MESSAGE_TTL, else never)",
        json_schema_extra={
            "minimum": MESSAGE_EXPIRY_MIN_SECONDS,
            "maximum": MESSAGE_EXPIRY_MAX_SECONDS,
        },
    )


class MessageSendOut(Schema):
    message_id: str
    omitted_chars: int = Field(
        description=f"Characters the {BODY_MAX_CHARS:,}-character cap dropped."
    )
    redactions: int = Field(description="Secrets scrubbed from subject and body.")
    idempotent_replay: bool = Field(
        description="True when the idempotency_key was used within 24 hours: nothing new "
        "was written and message_id is the first send's (answered with 200, not 201)."
    )


class DecisionOptionOut(Schema):
    id: str
    label: str
    description: str | None
    recommended: bool


class DecisionOut(Schema):
    """A ``decision:`` question read from the body."""

    question: str
    requires_root: bool
    reply_project: str | None = Field(description="workspace/project the answer goes to.")
    options: list[DecisionOptionOut]
    details: str | None
    links: list[str]


class DecisionReplyOut(Schema):
    """A ``decision-reply: <question id>`` answer read from the body."""

    question_id: str
    option: str
    comment: str
    accepted: bool = Field(
        description="Decided by the server at send: true only when the reply answers a "
        "question the recipient sent to the replying project, with an option it offers, "
        "and comes from root when the question requires root. Only accepted replies count."
    )
    refusal: str | None = Field(description="Why the reply is not accepted; null when it is.")
    via: Literal["web", "link", "elicitation", "deadline", "message"] = Field(
        description=(
            "How the reply came, set by the server: the answer page (web), an answer link "
            "(link), an MCP elicitation (elicitation), the deadline's fallback (deadline), "
            "or any other send (message)."
        )
    )


# Said of each name and id of a message's two ends (docs/operating.md#projects-and-grants).
UNNAMED = "Null when the caller may not read that project, as if it did not exist."


class MessageHeadOut(Schema):
    """A message without its body: what a status shows, and what every listing starts with."""

    id: str
    state: str = Field(json_schema_extra={"enum": ["pending", "claimed", "cancelled", "expired"]})
    to_workspace: str | None = Field(description=UNNAMED)
    to_project: str | None = Field(description=UNNAMED)
    to_workspace_id: str | None = Field(description=UNNAMED)
    to_project_id: str | None = Field(description=UNNAMED)
    from_workspace: str | None = Field(description=UNNAMED)
    from_project: str | None = Field(description=UNNAMED)
    from_workspace_id: str | None = Field(description=UNNAMED)
    from_project_id: str | None = Field(description=UNNAMED)
    from_agent: str
    from_owner_user: str | None
    subject: str | None
    in_reply_to: str | None
    decision: DecisionOut | None = Field(
        description="The question, when the subject starts with decision: and the body parses."
    )
    decision_reply: DecisionReplyOut | None = Field(
        description="The answer, when the subject is decision-reply: <question id>."
    )
    created_at: str
    claimed_at: str | None
    expires_at: str | None = Field(
        description="When it expires if still pending then; null: never."
    )


class MessageOut(MessageHeadOut):
    body: str


class MessageListQuery(Schema):
    workspace: NameText
    project: NameText
    # Documented, not validated: the domain answers another box with 400 invalid_box.
    box: str = Field("inbox", json_schema_extra={"enum": ["inbox", "outbox"]})
    limit: int = Field(
        LIST_LIMIT_DEFAULT, description=f"Clamped to {LIST_LIMIT_MIN}..{LIST_LIMIT_MAX}."
    )


class MessageListOut(Schema):
    messages: list[MessageOut]


class MessagePopIn(BodyIn):
    workspace: NameText
    project: NameText
    message_id: UuidText | None = None
    # Whole: true or "5" are not a number of seconds, and 1.5 is not whole.
    wait_seconds: WholeNumber | None = Field(
        None,
        description=f"Wait up to this many seconds for a message to claim (clamped to "
        f"0..{WAIT_SECONDS_MAX}; 0, the default, answers at once).",
    )
    in_reply_to: UuidText | None = Field(
        None, description="Pop only replies to this message (its in_reply_to), oldest first."
    )
    request_id: RetryIdText | None = Field(
        None,
        description=f"1-{RETRY_ID_MAX_CHARS} characters. A retry with the same id within "
        "24 hours answers what the first pop claimed and claims nothing new.",
    )


class MessagePopOut(Schema):
    security_notice: str | None = Field(
        None, description="Present exactly when a message was claimed."
    )
    message: MessageOut | None


class MessageCancelIn(BodyIn):
    # Documented only (the route answers 400 cancel_target): exactly one of a
    # message_id or all: true.
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {
                    "required": ["message_id"],
                    "properties": {"message_id": {"type": "string"}, "all": {"const": False}},
                },
                {
                    "required": ["all"],
                    "properties": {"all": {"const": True}, "message_id": {"type": "null"}},
                },
            ]
        },
    )

    workspace: NameText
    project: NameText
    message_id: UuidText | None = None
    # Strict: the document says boolean, so 0, 1 or "yes" are refused, not guessed at.
    all: StrictBool = False


class MessageCancelOut(Schema):
    cancelled: int


class MessageStatusOut(MessageHeadOut):
    cancelled_at: str | None
    claimed_by_agent: str | None


class MessageSearchQuery(Schema):
    workspace: NameText
    project: NameText
    # Documented, not validated: the domain answers a longer query with 400 invalid_query,
    # and another box with 400 invalid_box (docs/reference.md#search-and-threads).
    q: str = Field(
        description="Words to find in subjects and bodies; a query of only stop words or "
        "punctuation finds nothing.",
        json_schema_extra={"maxLength": SEARCH_QUERY_MAX_CHARS},
    )
    box: str = Field("inbox", json_schema_extra={"enum": ["inbox", "outbox", "all"]})
    limit: int = Field(
        SEARCH_LIMIT_DEFAULT, description=f"Clamped to {LIST_LIMIT_MIN}..{SEARCH_LIMIT_MAX}."
    )


class MessageSearchHitOut(MessageHeadOut):
    snippet: str = Field(
        description=f"At most {SEARCH_SNIPPET_MAX_CHARS} characters around the match, the "
        "match in [ ]."
    )


class MessageSearchOut(Schema):
    messages: list[MessageSearchHitOut] = Field(description="Best match first, then newest.")


class MessageThreadQuery(Schema):
    workspace: NameText
    project: NameText


class MessageThreadOut(Schema):
    messages: list[MessageHeadOut] = Field(
        description="Oldest first; only messages the caller's project sent or received."
    )


class MessageStatusQuery(Schema):
    workspace: NameText
    project: NameText
    wait_seconds: int | None = Field(
        None,
        description="Wait up to this many seconds while the message is pending (clamped "
        f"to 0..{WAIT_SECONDS_MAX}); the answer is the message as it then is.",
    )
