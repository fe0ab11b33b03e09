"""Operator decisions: the one parser and the one writer (docs/reference.md#operator-decisions).

A question is a message whose subject starts with ``decision:`` and whose body holds the
YAML-like fields of the product document; a reply's subject is exactly
``decision-reply: <question id>`` and its body ``question_id``, ``option`` and a
``comment`` that runs to the end of the body. The server stores the text as it is: these
functions only read it for display and write it for the helpers. A body that does not
parse is an ordinary message, so the parsers answer ``None`` and never raise.
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any, Literal, NotRequired, TypedDict

import yaml

from aimemory_site.lib.durations import duration_seconds
from aimemory_site.lib.limits import MESSAGE_SUBJECT_MAX_CHARS

QUESTION_PREFIX = "decision:"
REPLY_PREFIX = "decision-reply:"

# A body is at most 8,000 characters; bound the retries a broken one can cost a listing.
_MAX_ATTEMPTS = 6
_TRUE = frozenset({"true", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "no", "n", "off", "0"})
# Keys whose values are prose: a retry quotes them when a colon or "#" broke the YAML.
_PROSE_KEYS = ("question", "label", "description", "details")
_PROSE_LINE = re.compile(
    r"^(?P<lead>[ ]*(?:-[ ]+)?)(?P<key>" + "|".join(_PROSE_KEYS) + r")[ ]*:[ ]+(?P<value>.*\S)[ ]*$"
)
# YAML 1.1 reads "- id: no" as False; an id is text, so keep the word as written.
_WORD_ID = re.compile(
    r"^(?P<lead>[ ]*(?:-[ ]+)?id[ ]*:[ ]+)(?P<word>yes|no|on|off|y|n|true|false)[ ]*$",
    re.IGNORECASE | re.MULTILINE,
)
_INDENT = re.compile(r"^[ \t]*(?:-[ \t]+)?", re.MULTILINE)
_FENCE = re.compile(r"^[ ]*(```|~~~)")
_REPLY_SUBJECT = re.compile(r"^decision-reply:\s*(\S+)$", re.IGNORECASE)


class DecisionOption(TypedDict):
    id: str
    label: str
    description: str | None
    recommended: bool


class Decision(TypedDict):
    question: str
    requires_root: bool
    reply_project: str | None
    options: list[DecisionOption]
    details: str | None
    links: list[str]
    # As the body wrote them; the send resolves the deadline to an RFC 3339 instant
    # (``deadline_resolve``) and stores that instead.
    deadline: NotRequired[str | None]
    on_deadline: NotRequired[str | None]


#: The fields of a question's JSON on every surface (docs/reference.md#operator-decisions);
#: the deadline is told by the message's ``expires_at`` and the body.
DECISION_FIELDS = ("question", "requires_root", "reply_project", "options", "details", "links")


class DecisionReply(TypedDict):
    question_id: str
    option: str
    comment: str


#: How an accepted answer came (docs/reference.md#decisions-reach-the-person), set by the
#: server and never read from a body: the answer page, an answer link, an MCP
#: elicitation, the deadline's fallback, or any other send.
ReplyVia = Literal["web", "link", "elicitation", "deadline", "message"]
#: The routes on which a person, not the model, chose (``decision wait --require-person``).
PERSON_VIAS: frozenset[str] = frozenset({"web", "link", "elicitation"})


class _Invalid(Exception):
    """A field of the wrong type: the body is not a decision."""


# --- reading ---------------------------------------------------------------------------


def _normalise(body: str) -> str:
    return body.replace("\r\n", "\n").replace("\r", "\n")


def _unfence(text: str, *, leading_only: bool = False) -> str | None:
    """What a Markdown fence (```yaml ... ```) holds, or ``None`` when there is none."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if line.strip()), None)
    if start is None or (leading_only and not _FENCE.match(lines[start])):
        return None
    start = next((i for i in range(start, len(lines)) if _FENCE.match(lines[i])), None)
    if start is None:
        return None
    end = next((i for i in range(start + 1, len(lines)) if _FENCE.match(lines[i])), len(lines))
    return "\n".join(lines[start + 1 : end])


def _quote_prose(text: str) -> str:
    """``text`` with unquoted prose values double-quoted, for a retry after a YAML error."""
    out = []
    for line in text.split("\n"):
        match = _PROSE_LINE.match(line)
        value = match.group("value") if match else ""
        if match and value[0] not in "\"'|>[{&*!":
            line = f"{match.group('lead')}{match.group('key')}: {json.dumps(value)}"
        out.append(line)
    return "\n".join(out)


def _candidates(text: str) -> Iterable[str]:
    """The texts to try: the body, what a fence holds, the body cut before trailing prose."""
    text = _INDENT.sub(lambda m: m.group(0).expandtabs(2), text)
    text = _WORD_ID.sub(r'\g<lead>"\g<word>"', text)
    fenced = _unfence(text)
    for base in (text, fenced):
        if base is not None:
            yield base
            yield _quote_prose(base)
    lines = text.split("\n")
    for cut in (i for i in range(len(lines) - 1, 0, -1) if not lines[i].strip()):
        head = "\n".join(lines[:cut])
        yield head
        yield _quote_prose(head)


def _load_mapping(text: str) -> dict[str, Any] | None:
    for attempt, candidate in enumerate(_candidates(text)):
        if attempt >= _MAX_ATTEMPTS:
            return None
        try:
            loaded = yaml.safe_load(candidate)
        except yaml.YAMLError:
            continue
        if isinstance(loaded, dict):
            fields = {str(k).strip().lower(): v for k, v in loaded.items()}
            if fields.get("question") is not None:
                return fields
    return None


def _text(value: object, *, required: bool = False) -> str | None:
    """A scalar as stripped text; ``None`` when absent or empty."""
    if value is None:
        if required:
            raise _Invalid
        return None
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise _Invalid
    text = str(value).strip()
    if not text and required:
        raise _Invalid
    return text or None


def _flag(value: object, *, default: bool = False) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, int | str):
        word = str(value).strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise _Invalid


def _reply_project(value: object) -> str | None:
    text = _text(value)
    if text is None:
        return None
    workspace, slash, project = text.partition("/")
    if not slash or not workspace.strip() or not project.strip() or "/" in project:
        return None
    return f"{workspace.strip()}/{project.strip()}"


def _options(value: object) -> list[DecisionOption]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _Invalid
    options: list[DecisionOption] = []
    seen: set[str] = set()
    for item in value:
        if isinstance(item, str | int) and not isinstance(item, bool):
            # "- accept": a bare id, its own label.
            item = {"id": item}
        if not isinstance(item, dict):
            raise _Invalid
        fields = {str(k).strip().lower(): v for k, v in item.items()}
        option_id = _text(fields.get("id"), required=True)
        assert option_id is not None
        if option_id in seen:
            continue
        seen.add(option_id)
        options.append(
            {
                "id": option_id,
                "label": _text(fields.get("label")) or option_id,
                "description": _text(fields.get("description")),
                "recommended": _flag(fields.get("recommended")),
            }
        )
    return options


def _links(value: object) -> list[str]:
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    links = []
    for item in items:
        link = _text(item)
        if link is not None:
            links.append(link)
    return links


def _deadline_text(value: object) -> str | None:
    """A deadline as written: YAML reads an unquoted timestamp as a datetime, which is
    written back in RFC 3339 (a naive one is UTC, as YAML 1.1 says)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()  # no time of day: the send refuses it, saying so
    return _text(value)


def decision_parse(subject: str | None, body: str) -> Decision | None:
    """The question a ``decision:`` message asks, or ``None`` for any other message."""
    if subject is None or not subject.strip().lower().startswith(QUESTION_PREFIX):
        return None
    try:
        fields = _load_mapping(_normalise(body))
        if fields is None:
            return None
        question = _text(fields.get("question"), required=True)
        assert question is not None
        decision: Decision = {
            "question": question,
            "requires_root": _flag(fields.get("requires_root")),
            "reply_project": _reply_project(fields.get("reply_project")),
            "options": _options(fields.get("options")),
            "details": _text(fields.get("details")),
            "links": _links(fields.get("links")),
        }
        # Present only when written, so a question without them keeps its six fields.
        deadline = _deadline_text(fields.get("deadline"))
        if deadline is not None:
            decision["deadline"] = deadline
        on_deadline = _text(fields.get("on_deadline"))
        if on_deadline is not None:
            decision["on_deadline"] = on_deadline
        return decision
    except (_Invalid, AssertionError, TypeError, ValueError, RecursionError):
        return None


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        try:
            loaded = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        if isinstance(loaded, str):
            return loaded
    return value


def _comment(first: str, rest: list[str]) -> str:
    head = first.strip()
    if re.fullmatch(r"[|>][+-]?", head):
        # A YAML block scalar: the indented lines that follow are the comment.
        return textwrap.dedent("\n".join(rest)).strip()
    text = "\n".join([first, *rest]).strip()
    if "\n" not in text:
        return _unquote(text)
    return text


def decision_reply_parse(subject: str | None, body: str) -> DecisionReply | None:
    """The answer a ``decision-reply: <id>`` message gives, or ``None``."""
    try:
        match = _REPLY_SUBJECT.match((subject or "").strip())
        if match is None:
            return None
        subject_id = match.group(1)
        text = _normalise(body)
        lines = (_unfence(text, leading_only=True) or text).split("\n")
        fields: dict[str, str] = {}
        comment = ""
        for index, line in enumerate(lines):
            key, colon, value = line.partition(":")
            key = key.strip().lower()
            if not colon:
                continue
            if key == "comment":
                comment = _comment(value, lines[index + 1 :])
                break
            if key in ("question_id", "option") and key not in fields:
                fields[key] = _unquote(value)
        question_id = fields.get("question_id") or subject_id
        option = fields.get("option")
        if question_id != subject_id or not option:
            return None
        return {"question_id": question_id, "option": option, "comment": comment}
    except (TypeError, ValueError, RecursionError):
        return None


#: A deadline comes at the earliest a minute after the send, at the latest 30 days.
DEADLINE_MIN = timedelta(seconds=60)
DEADLINE_MAX = timedelta(days=30)


def deadline_resolve(text: str, sent_at: datetime) -> datetime:
    """The instant a question's ``deadline`` names: an RFC 3339 time, or a duration
    (``90s``, ``45m``, ``2h``, ``7d``, or seconds) counted from ``sent_at``. ValueError,
    saying why, for anything else and for an instant outside 60 s .. 30 days after the
    send."""
    text = text.strip()
    try:
        deadline = sent_at + timedelta(seconds=duration_seconds(text))
    except ValueError:
        try:
            deadline = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(
                f"deadline {text[:40]!r} is neither an RFC 3339 time "
                "(2026-12-07T10:00:00Z) nor a duration (90s, 45m, 2h, 7d)"
            ) from None
        if deadline.tzinfo is None:
            raise ValueError(
                f"deadline {text[:40]!r} names no time zone; write it in RFC 3339 "
                "(2026-12-07T10:00:00Z)"
            ) from None
    if not DEADLINE_MIN <= deadline - sent_at <= DEADLINE_MAX:
        raise ValueError(
            f"deadline {text[:40]!r} must fall between 60 seconds and 30 days after the send"
        )
    return deadline


def deadline_text(deadline: datetime) -> str:
    """A deadline as messages say it: RFC 3339, UTC, whole seconds (``2026-12-07T10:00:00Z``)."""
    return deadline.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- writing ---------------------------------------------------------------------------


def _scalar(value: str) -> str:
    """``value`` as a YAML scalar: plain when YAML reads it back unchanged, else quoted."""
    if value and value == value.strip() and "\n" not in value:
        try:
            if yaml.safe_load(f"k: {value}") == {"k": value}:
                return value
        except yaml.YAMLError:
            pass
    quoted = json.dumps(value, ensure_ascii=False)
    try:
        if yaml.safe_load(f"k: {quoted}") == {"k": value}:
            return quoted
    except yaml.YAMLError:
        pass
    return json.dumps(value)


def _one_line(value: str) -> str:
    return " ".join(value.split())


def decision_subject(question: str) -> str:
    """``decision: <question>`` on one line, within 200 characters."""
    subject = f"{QUESTION_PREFIX} {_one_line(question)}"
    return (
        subject
        if len(subject) <= MESSAGE_SUBJECT_MAX_CHARS
        else subject[: MESSAGE_SUBJECT_MAX_CHARS - 1] + "…"
    )


def decision_reply_subject(question_id: str) -> str:
    return f"{REPLY_PREFIX} {question_id.strip()}"


def decision_body_write(
    question: str,
    options: Sequence[Mapping[str, Any]],
    *,
    requires_root: bool,
    reply_project: str,
    details: str | None = None,
    links: Iterable[str] = (),
    deadline: str | None = None,
    on_deadline: str | None = None,
) -> str:
    """The body of a question, in the product document's layout. ``deadline`` goes as
    written (a duration is counted from the send by the server)."""
    lines = [
        f"question: {_scalar(_one_line(question))}",
        f"requires_root: {'true' if requires_root else 'false'}",
        f"reply_project: {_scalar(reply_project.strip())}",
        "options:",
    ]
    for option in options:
        option_id = str(option["id"]).strip()
        label = str(option.get("label") or option_id)
        lines.append(f"- id: {_scalar(option_id)}")
        lines.append(f"  label: {_scalar(label)}")
        if option.get("description"):
            lines.append(f"  description: {_scalar(str(option['description']))}")
        if option.get("recommended"):
            lines.append("  recommended: true")
    if details:
        lines.append(f"details: {_scalar(details)}")
    links = [link for link in links if link]
    if links:
        lines.append("links:")
        lines.extend(f"- {_scalar(link)}" for link in links)
    if deadline:
        lines.append(f"deadline: {_scalar(deadline.strip())}")
    if on_deadline:
        lines.append(f"on_deadline: {_scalar(on_deadline.strip())}")
    return "\n".join(lines)


def decision_reply_write(question_id: str, option: str, comment: str = "") -> str:
    """The body of a reply; the comment runs to the end, as written."""
    lines = [f"question_id: {_scalar(question_id.strip())}", f"option: {_scalar(option)}"]
    comment = comment.strip()
    first = comment.split("\n", 1)[0]
    if re.fullmatch(r"[|>][+-]?", first) or (
        "\n" not in comment and len(comment) >= 2 and comment[0] == comment[-1] in "\"'"
    ):
        comment = json.dumps(comment, ensure_ascii=False)  # read back as written
    lines.append(f"comment: {comment}" if comment else "comment:")
    return "\n".join(lines)
