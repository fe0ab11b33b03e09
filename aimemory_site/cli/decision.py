"""``ai-memory decision ask|answer|wait``: operator decisions over the mailbox.

A question is an ordinary message whose subject and body follow the decision convention;
the answer is an ordinary send back to the asker, and ``wait`` waits for it on the server
(a pop of replies to the question that parks until one arrives, asked again until the
timeout). The text is written by ``aimemory_site.lib.decisions``, the one writer every surface
shares: it imports no Django, so this client module may use it. It loads YAML, about 15%
of the CLI's start-up, and ``main`` imports this module for every command, the
session-start hook's included: so only the decision commands import it, when they run.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
import urllib.parse
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from time import monotonic
from typing import Any, TextIO

from aimemory_site.cli.client import ApiClient, ClientError
from aimemory_site.cli.common import (
    add_json_flag,
    add_scope_flags,
    answer_count,
    answer_str,
    current_scope,
    malformed,
    print_json,
    terminal_safe,
    timeout_arg,
)
from aimemory_site.cli.errors import CliError, UsageError
from aimemory_site.cli.help_text import SubParsers, add_command, scope_help
from aimemory_site.cli.messages import CANCEL_PATH, MESSAGES_PATH, POP_PATH
from aimemory_site.cli.scope import Scope
from aimemory_site.lib.limits import LIST_LIMIT_MAX, MESSAGE_BODY_MAX_CHARS, wait_seconds_clamp

WAIT_TIMEOUT_DEFAULT_SECONDS = 600.0
# Seconds past a question's deadline that a wait still waits for the asker's fallback
# answer, which the server sends within a second or so of it.
FALLBACK_GRACE_SECONDS = 4.0
# How often a wait that takes only a person's answer looks at the inbox.
PERSON_LOOK_EVERY_SECONDS = 2.0
# The exit status of a wait whose question reached its deadline unanswered.
EXIT_EXPIRED = 3
# A wait on a terminal says that it still waits this often.
WAIT_PROGRESS_EVERY_SECONDS = 60.0
# The server's code for an unknown project (aimemory_site.lib.errors.Code, which this
# Django-free client cannot import).
PROJECT_NOT_FOUND = "project_not_found"

Message = Mapping[str, Any]


@dataclass(frozen=True)
class OptionArg:
    """One ``--option ID:LABEL[:DESCRIPTION]``."""

    id: str
    label: str
    description: str | None


# ---- pure parts ---------------------------------------------------------------------------


def option_arg(text: str) -> OptionArg:
    """``ID:LABEL[:DESCRIPTION]``; the description may hold colons of its own."""
    option_id, colon, rest = text.partition(":")
    label, _, description = rest.partition(":")
    if not colon or not option_id.strip() or not label.strip():
        raise argparse.ArgumentTypeError(f"expected ID:LABEL[:DESCRIPTION], got {text!r}")
    return OptionArg(option_id.strip(), label.strip(), description.strip() or None)


def canonical_id(text: str) -> str | None:
    """A message id as the server writes it (lower-case UUID), or ``None`` for no UUID."""
    try:
        return str(uuid.UUID(text.strip()))
    except ValueError:
        return None


def question_options(options: Sequence[OptionArg], recommended: str | None) -> list[dict[str, Any]]:
    """The options the writer takes; raises UsageError for a set no one could answer."""
    if not options:
        raise UsageError("a decision needs at least one --option ID:LABEL[:DESCRIPTION]")
    ids = [option.id for option in options]
    duplicates = sorted({option_id for option_id in ids if ids.count(option_id) > 1})
    if duplicates:
        raise UsageError(f"duplicate option id: {', '.join(duplicates)}")
    if recommended is not None and recommended.strip() not in ids:
        raise UsageError(f"--recommended {recommended!r} names none of the options")
    return [
        {
            "id": option.id,
            "label": option.label,
            "description": option.description,
            "recommended": recommended is not None and option.id == recommended.strip(),
        }
        for option in options
    ]


def accepted_reply(message: Message, question_id: str, *, require_person: bool = False) -> bool:
    """Whether ``message`` is an answer to ``question_id`` that the server accepted at
    send (with ``require_person``: one a person chose, on the answer page, through an
    answer link or an elicitation). Any other reply (a forged one, one that does not
    parse) is ordinary mail."""
    from aimemory_site.lib.decisions import PERSON_VIAS, decision_reply_subject

    reply = message.get("decision_reply")
    return (
        message.get("subject") == decision_reply_subject(question_id)
        and isinstance(reply, dict)
        and reply.get("question_id") == question_id
        and isinstance(reply.get("option"), str)
        and reply.get("accepted") is True
        and (not require_person or reply.get("via") in PERSON_VIAS)
    )


def oldest_reply(
    messages: Sequence[Message], question_id: str, *, require_person: bool = False
) -> Message | None:
    """The oldest listed accepted answer to ``question_id``. ``messages`` is a listing, so
    it is oldest first."""
    return next(
        (m for m in messages if accepted_reply(m, question_id, require_person=require_person)),
        None,
    )


def server_wait_seconds(remaining: float) -> int:
    """How long the next pop asks the server to wait: what is left of the timeout, rounded
    up (a wait never gives up early), at most the server's longest wait."""
    return wait_seconds_clamp(math.ceil(remaining))


class WaitProgress:
    """The line a wait prints on a terminal, once a minute, so a person sees it is alive;
    nothing when stderr is a pipe or a file (a script reads the outcome, not the wait)."""

    def __init__(self, stream: TextIO, line: str) -> None:
        self.stream = stream
        self.line = line
        self.last: float | None = None
        self.enabled = stream.isatty()

    def tick(self, now: float, remaining: float) -> None:
        if not self.enabled:
            return
        if self.last is not None and now - self.last < WAIT_PROGRESS_EVERY_SECONDS:
            return
        self.last = now
        print(f"{self.line} ({remaining:.0f} s left)", file=self.stream, flush=True)


# ---- server calls -------------------------------------------------------------------------


def _inbox(client: ApiClient, scope: Scope) -> list[Message]:
    """The oldest pending messages of ``scope``'s inbox, as many as a listing holds."""
    query = {"workspace": scope.workspace, "project": scope.project, "box": "inbox"}
    answer = client.get(MESSAGES_PATH, {**query, "limit": LIST_LIMIT_MAX})
    listed = answer.get("messages")
    if not isinstance(listed, list) or not all(isinstance(m, dict) for m in listed):
        raise malformed(f"GET {MESSAGES_PATH}", "messages")
    return listed


def _send(client: ApiClient, payload: dict[str, str]) -> dict[str, Any]:
    # A key of this invocation: the one retry can then never send twice.
    payload["idempotency_key"] = f"cli-{uuid.uuid4()}"
    answer = client.post_retrying_once(MESSAGES_PATH, payload)
    answer_str(answer, "message_id", f"POST {MESSAGES_PATH}")
    return answer


# ---- commands -----------------------------------------------------------------------------


def run_ask(args: argparse.Namespace) -> int:
    from aimemory_site.lib.decisions import decision_body_write, decision_parse, decision_subject

    question: str = args.question.strip()
    if not question:
        raise UsageError("the question is empty")
    options = question_options(args.option, args.recommended)
    asker = current_scope(args.from_workspace, args.from_project)
    body = decision_body_write(
        question,
        options,
        requires_root=args.requires_root,
        reply_project=asker.label,
        details=args.details,
        links=args.link,
        deadline=args.deadline,
        on_deadline=args.on_deadline,
    )
    if len(body) > MESSAGE_BODY_MAX_CHARS:
        # The server would cut it, and a cut question no longer parses.
        raise UsageError(
            f"the question is {len(body):,} chars as a message body; "
            f"at most {MESSAGE_BODY_MAX_CHARS:,} fit"
        )
    subject = decision_subject(question)
    written = decision_parse(subject, body)
    if written is None or [o["id"] for o in written["options"]] != [o["id"] for o in options]:
        raise UsageError("these options cannot be written as a decision the answerer can read")
    answer = _send(
        ApiClient.from_environment(),
        {
            "to_workspace": args.to_workspace,
            "to_project": args.to_project,
            "from_workspace": asker.workspace,
            "from_project": asker.project,
            "subject": subject,
            "body": body,
        },
    )
    if args.json:
        print_json(answer)
    else:
        print(answer["message_id"])
    return 0


def run_answer(args: argparse.Namespace) -> int:
    from aimemory_site.lib.decisions import decision_reply_subject, decision_reply_write

    mailbox = current_scope(args.workspace, args.project)
    client = ApiClient.from_environment()
    question_id = canonical_id(args.id)
    listed = _inbox(client, mailbox) if question_id is not None else []
    question = next((m for m in listed if m.get("id") == question_id), None)
    if question_id is None or question is None:
        # Also a question behind the 200 oldest pending messages: a listing has no offset.
        raise CliError(f"no pending decision {args.id} in {mailbox.label}'s inbox")
    decision = question.get("decision")
    if not isinstance(decision, dict):
        raise CliError(f"message {question_id} in {mailbox.label} is not a decision question")
    offered = [o.get("id") for o in decision.get("options") or [] if isinstance(o, dict)]
    option: str = args.option.strip()
    if option not in offered:
        choices = ", ".join(str(o) for o in offered) or "none"
        raise CliError(f"decision {question_id} offers no option {option!r} (it offers: {choices})")
    reply_project = decision.get("reply_project")
    workspace, _, project = str(reply_project or "").partition("/")
    if not workspace or not project:
        raise CliError(f"decision {question_id} names no reply_project to send the answer to")
    try:
        answer = _send(
            client,
            {
                "to_workspace": workspace,
                "to_project": project,
                "from_workspace": mailbox.workspace,
                "from_project": mailbox.project,
                "subject": decision_reply_subject(question_id),
                "body": decision_reply_write(question_id, option, args.comment or ""),
                "in_reply_to": question_id,
            },
        )
    except ClientError as exc:
        # The mailbox was listed a moment ago, so the project the server does not know is
        # the reply project; the server's own advice (check the names you typed) would
        # send the operator after names the asker wrote.
        if exc.code != PROJECT_NOT_FOUND:
            raise
        raise CliError(
            f"decision {question_id} names reply_project {workspace}/{project}, which was "
            "not found (no such project, or one you may not read), so no answer was sent. "
            "Ask the asker to send the question again with the right reply_project."
        ) from exc
    reply_id: str = answer["message_id"]
    reply = _reply_of(client, mailbox, reply_id)
    if args.json:
        # What memory_decision_answer answers: the sent reply (docs/reference.md#cli).
        print_json({"message_id": reply_id, "decision_reply": reply})
    else:
        asker = f"{workspace}/{project}"
        said = format_answered(question_id, option, reply_id, asker, reply["accepted"])
        print(terminal_safe(said))
    if not reply["accepted"]:
        # Sent, like any message, but 'decision wait' will not take it: say so, and why.
        refusal = terminal_safe(str(reply.get("refusal")))
        raise CliError(f"the reply was sent, but the asker will not take it: {refusal}")
    return 0


def format_answered(
    question_id: str, option: str, reply_id: str, asker: str, accepted: bool = True
) -> str:
    """What ``decision answer`` sent: the question, the option, the reply and where it
    went. A reply the server did not accept is sent, not an answer: the error line after
    it says why."""
    if not accepted:
        return f"Sent reply {reply_id} to {asker} for decision {question_id}: {option}."
    return f"Answered decision {question_id}: {option} (reply {reply_id} sent to {asker})."


def _reply_of(client: ApiClient, mailbox: Scope, reply_id: str) -> dict[str, Any]:
    """The ``decision_reply`` of the reply ``mailbox`` sent: whether the server accepted it
    as the answer, as it decided at send, and if not why."""
    path = f"{MESSAGES_PATH}/{urllib.parse.quote(reply_id, safe='')}"
    status = client.get(path, {"workspace": mailbox.workspace, "project": mailbox.project})
    reply = status.get("decision_reply")
    if not isinstance(reply, dict) or not isinstance(reply.get("accepted"), bool):
        raise malformed(f"GET {path}", "decision_reply")
    return reply


def _pop(
    client: ApiClient, asker: Scope, fields: Mapping[str, str], wait_seconds: int = 0
) -> Message | None:
    """Pop from the asker's inbox what ``fields`` select (``message_id`` or
    ``in_reply_to``), the server waiting up to ``wait_seconds`` for it; ``None`` when
    nothing was claimed (another reader was first, or the time was up)."""
    payload: dict[str, Any] = {"workspace": asker.workspace, "project": asker.project, **fields}
    if wait_seconds:
        payload["wait_seconds"] = wait_seconds
    # An id of this invocation: the one retry answers what the first pop claimed.
    payload["request_id"] = f"cli-{uuid.uuid4()}"
    answer = client.post_retrying_once(POP_PATH, payload, wait_seconds=wait_seconds)
    if "message" not in answer:
        raise malformed(f"POST {POP_PATH}", "message")
    popped = answer["message"]
    if popped is None:
        return None
    if not isinstance(popped, dict):
        raise malformed(f"POST {POP_PATH}", "message")
    return popped


def _next_reply(
    client: ApiClient,
    asker: Scope,
    question_id: str,
    wait_seconds: int,
    *,
    require_person: bool = False,
) -> Message | None:
    """The next reply to ``question_id`` this wait claims, or None at the server's timeout.

    An accepted reply already pending is taken first, by its id, ahead of older replies
    the server refused, which stay in the inbox as ordinary mail. Otherwise the server
    waits for a reply (a pop of the question's replies, oldest first), which may be one it
    refused: the caller says so and waits on. With ``require_person`` no reply but a
    person's is claimed, so the rest stay pending for the asker to read: the pop by reply
    cannot tell them apart, so the inbox is looked at again every
    ``PERSON_LOOK_EVERY_SECONDS`` instead.
    """
    pending = oldest_reply(_inbox(client, asker), question_id, require_person=require_person)
    if pending is not None:
        popped = _pop(client, asker, {"message_id": pending["id"]})
        if popped is not None:
            return popped
        # Another reader of this inbox claimed it first: wait for the next.
    if require_person:
        time.sleep(min(wait_seconds, PERSON_LOOK_EVERY_SECONDS))
        return None
    return _pop(client, asker, {"in_reply_to": question_id}, wait_seconds)


def _question_expiry(client: ApiClient, asker: Scope, question_id: str) -> float | None:
    """When the question expires (its deadline), as a ``time.time()``; None when it never
    does or the asker cannot see it (the wait then ends only at its timeout)."""
    path = f"{MESSAGES_PATH}/{urllib.parse.quote(question_id, safe='')}"
    try:
        status = client.get(path, {"workspace": asker.workspace, "project": asker.project})
    except ClientError:
        return None
    expires_at = status.get("expires_at")
    if not isinstance(expires_at, str):
        return None
    try:
        return datetime.fromisoformat(expires_at).timestamp()
    except ValueError:
        return None


def _cancel_question(client: ApiClient, asker: Scope, question_id: str) -> None:
    """Withdraw the question, now answered; one already claimed or cancelled stays so."""
    payload = {"workspace": asker.workspace, "project": asker.project, "message_id": question_id}
    try:
        # Cancelling one id twice changes nothing, so a retry is safe.
        answer = client.post_retrying_once(CANCEL_PATH, payload)
        answer_count(answer, "cancelled", f"POST {CANCEL_PATH}")
    except ClientError as exc:
        # The reply is claimed already: failing now would lose the answer, so say it and
        # go on; the question stays listed until someone cancels it.
        print(f"ai-memory: answered, but the question stays pending: {exc}", file=sys.stderr)


def run_wait(args: argparse.Namespace) -> int:
    question_id = canonical_id(args.id)
    if question_id is None:
        raise CliError(f"{args.id!r} is not a message id, so no reply can name it")
    asker = current_scope(args.workspace, args.project)
    client = ApiClient.from_environment()
    deadline = monotonic() + args.timeout
    # The question's own deadline: the asker's fallback, when it set one, arrives just
    # after it; without one nothing will, and the wait ends (exit 3).
    expiry = _question_expiry(client, asker, question_id)
    progress = WaitProgress(
        sys.stderr, f"ai-memory: waiting for the answer to decision {question_id}"
    )
    while True:
        now = monotonic()
        progress.tick(now, deadline - now)
        remaining = deadline - now
        past_expiry = expiry is not None and time.time() >= expiry + FALLBACK_GRACE_SECONDS
        if expiry is not None and not past_expiry:
            remaining = min(remaining, expiry + FALLBACK_GRACE_SECONDS - time.time())
        popped = _next_reply(
            client,
            asker,
            question_id,
            0 if past_expiry else server_wait_seconds(remaining),
            require_person=args.require_person,
        )
        if popped is not None and accepted_reply(
            popped, question_id, require_person=args.require_person
        ):
            _cancel_question(client, asker, question_id)
            taken: dict[str, Any] = popped["decision_reply"]
            if args.json:
                print_json(taken)
                return 0
            print(terminal_safe(str(taken.get("option"))))
            comment = taken.get("comment")
            if isinstance(comment, str) and comment:
                print(terminal_safe(comment), file=sys.stderr)
            return 0
        if popped is not None:
            # Claimed by the pop of the question's replies, and not an answer: say so, as
            # nobody else will see it now.
            print(
                f"ai-memory: took reply {popped.get('id')} to decision {question_id}, but the "
                f"server did not accept it as the answer: {_refusal_text(popped)}",
                file=sys.stderr,
            )
            continue
        if past_expiry and expiry is not None:
            when = datetime.fromtimestamp(expiry, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            if args.json:
                print_json({"expired": True, "deadline": when})
            print(f"no answer by the deadline ({when})", file=sys.stderr)
            return EXIT_EXPIRED
        if monotonic() >= deadline:
            raise CliError(
                f"no answer to decision {question_id} in {asker.label}'s inbox "
                f"within {args.timeout:g} s"
            )


def _refusal_text(message: Message) -> str:
    reply = message.get("decision_reply")
    refusal = reply.get("refusal") if isinstance(reply, dict) else None
    if isinstance(refusal, str) and refusal:
        return terminal_safe(refusal)
    return "it is not a decision reply that parses"


# ---- arguments ----------------------------------------------------------------------------


def add_parser(subparsers: SubParsers) -> None:
    decision_parser = add_command(
        subparsers,
        "decision",
        summary="ask an operator a question, answer it, or wait for the answer",
        paragraphs=[
            "Operator decisions over the mailbox: an agent that must stop for a person asks "
            "a question with options in a mailbox project the operator reads; the operator "
            "answers with one option, sent back to the asking project; the asker waits for "
            "that answer. Questions and answers are ordinary messages in the decision "
            "convention ('decision: ...' and 'decision-reply: <id>').",
            scope_help(),
        ],
        examples=[
            "ai-memory decision ask --to-workspace default --to-project operator \\",
            '    --question "Accept the known-flake exception?" \\',
            '    --option "accept:Accept the exception" --option "reject:Send it back"',
            "ai-memory decision answer <question-id> --option accept --project operator",
            "ai-memory decision wait <question-id> --timeout 600",
        ],
    )
    commands = decision_parser.add_subparsers(
        dest="decision_command", metavar="{ask,answer,wait}", required=True
    )

    ask = add_command(
        commands,
        "ask",
        summary="send a question with options to a mailbox project",
        paragraphs=[
            "Send a decision question to the mailbox project where the operator reads mail, "
            "from the current project, which is where the answer comes back. Prints the "
            "question id alone: 'decision wait' takes it. Write the question and the "
            "options as a complete prompt: the operator sees nothing else.",
            "Each --option is ID:LABEL[:DESCRIPTION]; the ID is what the answer names, "
            "and what 'decision wait' prints.",
            scope_help("--from-workspace/--from-project"),
        ],
        examples=[
            "ai-memory decision ask --to-workspace default --to-project operator \\",
            '    --question "Merge the release branch?" --requires-root \\',
            '    --option "merge:Merge it:CI is green" --option "hold:Hold it" \\',
            "    --recommended merge --link https://example.test/pull/12",
        ],
    )
    ask.add_argument("--to-workspace", required=True, metavar="W", help="mailbox workspace")
    ask.add_argument("--to-project", required=True, metavar="P", help="mailbox project")
    ask.add_argument("--question", required=True, metavar="Q", help="the question")
    ask.add_argument(
        "--option",
        type=option_arg,
        action="append",
        default=[],
        metavar="ID:LABEL[:DESCRIPTION]",
        help="one choice (repeat for each; at least one)",
    )
    ask.add_argument("--recommended", metavar="ID", help="the option you recommend")
    ask.add_argument(
        "--requires-root", action="store_true", help="mark a risky decision (merge, deploy)"
    )
    ask.add_argument("--details", metavar="TEXT", help="context the operator needs")
    ask.add_argument(
        "--deadline",
        metavar="D",
        help="when the question expires: RFC 3339 or a duration from the send (90m, 2h, 7d)",
    )
    ask.add_argument(
        "--on-deadline",
        metavar="ID",
        help="the option the server answers at the deadline when nobody has",
    )
    ask.add_argument(
        "--link", action="append", default=[], metavar="URL", help="a link (repeatable)"
    )
    ask.add_argument(
        "--from-workspace", metavar="W", help="asking workspace (default: the current one)"
    )
    ask.add_argument(
        "--from-project", metavar="P", help="asking project (default: the current project)"
    )
    add_json_flag(ask)
    ask.set_defaults(handler=run_ask, command_parser=ask)

    answer = add_command(
        commands,
        "answer",
        summary="answer a pending question with one of its options",
        paragraphs=[
            "Answer a pending decision question in the current project's inbox (the "
            "mailbox): sends 'decision-reply: ID' with the chosen option to the project "
            "that asked, from the mailbox project, and says what it sent: 'Answered "
            "decision ID: OPTION (reply REPLY-ID sent to WS/PROJECT).' (--json: the reply's "
            "message_id and decision_reply). Refuses an option the question does not "
            "offer. Exits 1, saying why, when the server did not accept the reply as an "
            "answer (a requires_root question answered by someone who is not root): it was "
            "sent, but the asker will not take it. The question stays pending: the asker "
            "withdraws it when it takes the answer.",
            scope_help(),
        ],
        examples=[
            "ai-memory message list --project operator",
            "ai-memory decision answer <question-id> --option accept --project operator \\",
            '    --comment "The flake is written down."',
        ],
    )
    answer.add_argument("id", metavar="ID", help="the question's message id")
    answer.add_argument("--option", required=True, metavar="ID", help="the chosen option id")
    answer.add_argument("--comment", metavar="TEXT", help="free text for the asker")
    add_scope_flags(answer)
    answer.add_argument(
        "--json", action="store_true", help="print the reply's message_id and decision_reply"
    )
    answer.set_defaults(handler=run_answer, command_parser=answer)

    wait = add_command(
        commands,
        "wait",
        summary="wait for the answer to a question and print the chosen option",
        paragraphs=[
            "Wait on the server for the answer in the current project's inbox (the "
            "asker's): the oldest pending 'decision-reply: ID' that the server accepted, or "
            "else the next reply to the question to arrive (a pop of its replies that waits "
            "up to 60 s, asked again until --timeout; no polling). The server accepts a "
            "reply only from the project the question went to, with an option it offers, "
            "and from root when the question requires root. Pops the accepted reply, "
            "cancels the question and prints the chosen option id alone on stdout, and the "
            "comment, when there is one, on stderr (--json: the reply's decision_reply "
            "object, with its via). Exits 1 when no answer came within --timeout, and 3 "
            "when the question reached its deadline unanswered (no fallback): 'no answer "
            "by the deadline (<deadline>)' on stderr, and with --json "
            '{"expired": true, "deadline": ...}. Later answers stay in the inbox as '
            "ordinary mail.",
            "A reply that is not an answer stays in the inbox as ordinary mail while an "
            "accepted one is pending; one that arrives while it waits (a non-root answer to "
            "a requires_root question, say) is taken out with the wait, and said on stderr "
            "with the server's reason. On a terminal it says once a minute, on stderr, that "
            "it is still waiting.",
            scope_help(),
        ],
        examples=[
            'option=$(ai-memory decision wait "$question_id" --timeout 1800) || exit 1',
        ],
    )
    wait.add_argument("id", metavar="ID", help="the question's message id (from 'decision ask')")
    wait.add_argument(
        "--timeout",
        type=timeout_arg,
        default=WAIT_TIMEOUT_DEFAULT_SECONDS,
        metavar="S",
        help=f"give up after S seconds (default {WAIT_TIMEOUT_DEFAULT_SECONDS:g})",
    )
    wait.add_argument(
        "--require-person",
        action="store_true",
        help="take only an answer a person chose (the answer page, an answer link, an "
        "elicitation); other answers stay pending for you to read",
    )
    add_scope_flags(wait)
    wait.add_argument("--json", action="store_true", help="print the reply's decision_reply")
    wait.set_defaults(handler=run_wait, command_parser=wait)
