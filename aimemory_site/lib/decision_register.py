"""The decisions register's pages (docs/reference.md#the-decisions-register): the one
writer of a ``_decisions/<question id>`` page and the one reader of the line the brief
shows for it.

The messaging app writes a page when an accepted answer is sent; the brief (the projects
app, below messaging) reads its line back from the page's first lines, so both live here.
Pure text, no Django. The page is Markdown: its first line names the question and a list
of ``- Key: value`` lines follows, each value flattened to one line, so that no text of a
question, an option or a comment can add a line the reader would take for a field. The
comment, the one text that comes from the answering project, goes last, in a fenced
block the web shows as written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from aimemory_site.lib.decisions import DecisionOption

REGISTER_PREFIX = "_decisions/"
#: How much of a question and of an option's label a brief line shows (a subject's cap).
BRIEF_TEXT_MAX_CHARS = 200

_HEADING = "# Decision: "
_CHOSEN = "Chosen option"
_OPTION_ID = "Option id"
_USER = "Answered by"
_PROJECT = "Answered from"
_VIA = "Via"
_ASKED = "Asked"
_ANSWERED = "Answered"
_QUESTION_ID = "Question id"
_FIELD = re.compile(r"- (?P<key>[A-Za-z ]+): (?P<value>.*)")
_DATE = re.compile(r"(\d{4}-\d{2}-\d{2})T")
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_TILDES = re.compile(r"~+")


@dataclass(frozen=True)
class RegisterEntry:
    """What a register page records: an accepted answer to a decision question."""

    question_id: str
    question: str  # the body's question, not the subject's short form
    options: Sequence[DecisionOption]
    option: str  # the chosen option's id; one of ``options``
    comment: str
    user: str  # the answering user (the reply's ``from_owner_user``); "" for none
    project: str  # the answering project, ``ws/proj``
    via: str
    asked_at: datetime  # aware
    answered_at: datetime  # aware


def register_path(question_id: str) -> str:
    """The page of ``question_id`` in the asking project's register."""
    return f"{REGISTER_PREFIX}{question_id}"


def _one_line(text: str) -> str:
    return " ".join(_BREAKS.sub(" ", text).split())


def _moment(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _fenced(text: str) -> list[str]:
    """``text`` in a fence no line of it can close (longer than its longest run of ``~``)."""
    longest = max((len(run) for run in _TILDES.findall(text)), default=0)
    fence = "~" * max(3, longest + 1)
    return [fence, text, fence]


def register_body_write(entry: RegisterEntry) -> str:
    """The Markdown of ``entry``'s page. Precondition: ``entry.option`` is one of its
    options (the answer was accepted, so the question offers it)."""
    chosen = next(option for option in entry.options if option["id"] == entry.option)
    fields = [
        (_CHOSEN, chosen["label"]),
        (_OPTION_ID, chosen["id"]),
        *([(_USER, entry.user)] if entry.user else []),
        (_PROJECT, entry.project),
        (_VIA, entry.via),
        (_ASKED, _moment(entry.asked_at)),
        (_ANSWERED, _moment(entry.answered_at)),
        (_QUESTION_ID, entry.question_id),
    ]
    lines = [f"{_HEADING}{_one_line(entry.question)}", ""]
    lines += [f"- {key}: {_one_line(value)}" for key, value in fields]
    lines += ["", "## Options", ""]
    for option in entry.options:
        marks = [f"option {_one_line(option['id'])}"]
        if option["recommended"]:
            marks.append("recommended")
        if option["id"] == entry.option:
            marks.append("chosen")
        line = f"- {_one_line(option['label'])} ({', '.join(marks)})"
        if option["description"]:
            line += f": {_one_line(option['description'])}"
        lines.append(line)
    lines += ["", "## Comment", ""]
    comment = entry.comment.strip()
    lines += _fenced(comment) if comment else ["(no comment)"]
    return "\n".join(lines) + "\n"


def _cut(text: str) -> str:
    if len(text) <= BRIEF_TEXT_MAX_CHARS:
        return text
    return text[: BRIEF_TEXT_MAX_CHARS - 1].rstrip() + "…"


def register_brief_line(body: str) -> str | None:
    """The brief's line for a register page: ``- <question> -> <option label>
    (<YYYY-MM-DD>, <who>)``, ``<who>`` the answering user, else the answering project;
    the question and the label cut to 200 characters. None for a body that is not in
    the form ``register_body_write`` writes (a page someone else wrote at the path)."""
    lines = body.split("\n", 12)
    if not lines[0].startswith(_HEADING) or len(lines) < 3 or lines[1]:
        return None
    fields: dict[str, str] = {}
    for line in lines[2:]:
        match = _FIELD.fullmatch(line)
        if match is None:
            break
        fields.setdefault(match.group("key"), match.group("value").strip())
    question = lines[0][len(_HEADING) :].strip()
    label = fields.get(_CHOSEN)
    date = _DATE.match(fields.get(_ANSWERED, ""))
    who = fields.get(_USER) or fields.get(_PROJECT)
    if not question or not label or date is None or not who:
        return None
    return f"- {_cut(question)} -> {_cut(label)} ({date.group(1)}, {who})"
