"""Reads for answering an operator decision (docs/reference.md#operator-decisions, the answer page).

Who may answer a question is decided here once. At send, for every surface,
``reply_verdict`` says whether a ``decision-reply:`` is accepted (the asker's
``decision wait`` and the web take only those). The answer page asks ``answer_refusal``
first, which the answer service raises and the page shows, so the page never offers a form
that the service would refuse nor sends a reply the verdict would not accept. Both spell
"root" with ``principal_is_root``.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import cast

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import Case, OuterRef, Subquery, Value, When
from django.utils import timezone

from aimemory_site.lib.decisions import (
    Decision,
    DecisionReply,
    ReplyVia,
    decision_reply_subject,
)
from aimemory_site.lib.errors import AppError, BadRequest, Code, Forbidden
from aimemory_site.lib.principal import Principal
from messaging.models import Message
from projects.access import (
    Level,
    project_access,
    project_level,
    project_level_of,
    readable_projects,
)
from projects.models import Grant, Project

# How many earlier answers the page lists (newest first); more is a sign of a loop, and
# the page says there are more.
EARLIER_ANSWERS_LIMIT = 20


def principal_is_root(principal: Principal) -> bool:
    """Root for a ``requires_root`` question: the root token, a superuser, or the user
    whose name is ``AI_MEMORY_ROOT_USERNAME`` (never anyone when that is unset)."""
    if principal.kind == "root":
        return True
    root_name = settings.AI_MEMORY_ROOT_USERNAME
    user = principal.user
    return bool(root_name) and user is not None and user.get_username() == root_name


class JudgedReply(DecisionReply):
    """A reply as stored at send: what it says, and whether the server accepted it."""

    accepted: bool
    refusal: str | None  # one sentence saying why not; None when accepted
    via: ReplyVia


ROOT_REPLY_REFUSAL = (
    "the question requires root, and this reply was not sent by root (the root token, a "
    "superuser, or the user named by AI_MEMORY_ROOT_USERNAME)."
)


def reply_verdict(
    principal: Principal,
    sender: Project,
    recipient: Project,
    reply: DecisionReply | None,
    via: ReplyVia = "message",
) -> JudgedReply | None:
    """``reply``, sent by ``principal`` as ``sender`` to ``recipient``, judged once at
    send: accepted only when it answers a decision question that ``recipient`` sent to
    ``sender``, with an option the question offers, and, for a ``requires_root``
    question, from root. On an anonymous server the one principal counts as root here
    (the answer page is stricter: ``answer_refusal``). A refused reply is still an
    ordinary message. ``via`` records the route it came by (the caller's, never the
    body's). None for a message that is no reply. One query for a reply. Precondition: both projects come with their workspaces.
    """
    if reply is None:
        return None
    refusal = _reply_refusal(principal, sender, recipient, reply)
    return {**reply, "accepted": refusal is None, "refusal": refusal, "via": via}


def _reply_refusal(
    principal: Principal, sender: Project, recipient: Project, reply: DecisionReply
) -> str | None:
    question_id = reply["question_id"]
    try:
        question_pk: uuid.UUID | None = uuid.UUID(question_id)
    except ValueError:
        question_pk = None
    # The same sentence for a question elsewhere as for none: a reply must not learn
    # what other projects were asked.
    question = (
        Message.objects.filter(
            pk=question_pk, to_project=sender, from_project=recipient, decision__isnull=False
        )
        .only("decision")
        .first()
        if question_pk is not None
        else None
    )
    if question is None:
        return (
            f"question_id {question_id[:60]} names no decision question that {recipient} "
            f"sent to {sender}, so this reply answers nothing that was asked."
        )
    decision = decision_of(question)
    offered = [choice["id"] for choice in decision["options"]]
    if reply["option"] not in offered:
        shown = ", ".join(offered) or "none"
        return (
            f"option {reply['option'][:60]!r} is not one the question offers (it offers: {shown})."
        )
    if decision["requires_root"] and not (
        principal.kind == "anonymous" or principal_is_root(principal)
    ):
        return ROOT_REPLY_REFUSAL
    return None


def reply_accepted(reply: Message) -> bool:
    """Whether the server accepted ``reply`` as an answer when it was sent."""
    judged = reply.decision_reply
    return isinstance(judged, dict) and judged.get("accepted") is True


def decision_of(question: Message) -> Decision:
    """Precondition: ``question.decision`` is set (a question, as parsed at send)."""
    assert question.decision is not None
    return cast(Decision, question.decision)


def question_deadline(question: Message) -> datetime | None:
    """The deadline the asker set on ``question`` (its ``expires_at`` then), or None.
    Precondition: ``question.decision`` is set."""
    if not decision_of(question).get("deadline"):
        return None
    return question.expires_at


def question_fallback(question: Message) -> str | None:
    """The option the server answers at the deadline (``on_deadline``), or None."""
    return decision_of(question).get("on_deadline")


def not_a_pending_decision(mailbox: Project, question_id: uuid.UUID) -> BadRequest:
    return BadRequest(
        f"message {question_id} is not a pending decision question in the inbox of "
        f"{mailbox.workspace.name}/{mailbox.name}: only a pending message whose subject "
        "starts with 'decision:' and whose body parses as a question can be answered here",
        code=Code.NOT_A_PENDING_DECISION,
    )


def decision_question(mailbox: Project, question_id: uuid.UUID) -> Message | None:
    """The decision question ``question_id`` in the inbox of ``mailbox``, in any state,
    with its sender's names; None when there is no such message or it is no question.

    One query. Precondition: the caller may read ``mailbox``.
    """
    return (
        Message.objects.inbox_of(mailbox)
        .filter(pk=question_id, decision__isnull=False)
        .select_related("from_project__workspace")
        .first()
    )


def decision_pending(
    principal: Principal, workspace: str, project: str, question_id: uuid.UUID
) -> tuple[Project, Message]:
    """The mailbox ``workspace/project`` (with its workspace) and the pending decision
    question ``question_id`` in its inbox, for ``principal`` to answer; raises NotFound
    for a mailbox the caller may not read (as if missing) and BadRequest when the id
    names no pending decision question there. Two queries."""
    mailbox = project_access(principal, workspace, project, need=Level.READ)
    question = decision_question(mailbox, question_id)
    if question is None or not question.is_pending():
        raise not_a_pending_decision(mailbox, question_id)
    return mailbox, question


def decision_replies(
    mailbox: Project, question_id: uuid.UUID, *, limit: int = EARLIER_ANSWERS_LIMIT
) -> list[Message]:
    """The ``decision-reply: <question_id>`` messages the mailbox project sent, in any
    state, newest first, at most ``limit``: the answers already given from this mailbox,
    through this page or by any other surface (the CLI's ``decision answer``).

    One query. Precondition: the caller may read ``mailbox`` (its outbox is its own).
    """
    return list(
        Message.objects.outbox_of(mailbox)
        .filter(subject__iexact=decision_reply_subject(str(question_id)))
        .order_by("-created_at", "-id")
        .only(
            "id",
            "state",
            "created_at",
            "from_owner_user",
            "decision_reply",
            "idempotency_key",
            "idempotency_principal",
            "in_reply_to",
        )[:limit]
    )


def decision_answer_taken(mailbox: Project, question_id: uuid.UUID) -> Message | None:
    """The accepted answer to ``question_id`` sent from ``mailbox`` that the asker took:
    the claimed one, else (the asker withdrew the question without popping) the oldest
    accepted one, which is what ``decision wait`` takes; None when there is none.

    One query. Precondition: the caller may read ``mailbox``.
    """
    return (
        Message.objects.outbox_of(mailbox)
        .filter(
            subject__iexact=decision_reply_subject(str(question_id)),
            decision_reply__accepted=True,
        )
        .order_by(
            Case(When(state=Message.State.CLAIMED, then=Value(0)), default=Value(1)),
            "created_at",
            "id",
        )
        .only("id", "state", "created_at", "from_owner_user", "decision_reply")
        .first()
    )


def _levels(principal: Principal, projects: list[Project]) -> dict[uuid.UUID, Level]:
    """The caller's level on each of ``projects``: one query for their grants, none when
    no grant could matter (root, anonymous, open projects)."""
    restricted = [
        project.pk for project in projects if project.access_mode != Project.AccessMode.OPEN
    ]
    grants: dict[uuid.UUID, str] = {}
    if principal.user is not None and not principal.sees_everything and restricted:
        grants = dict(
            Grant.objects.filter(user=principal.user, project_id__in=restricted).values_list(
                "project_id", "level"
            )
        )
    return {
        project.pk: project_level(principal, project, grants.get(project.pk))
        for project in projects
    }


def _split(reply_project: str) -> tuple[str, str]:
    workspace, _, project = reply_project.partition("/")
    return workspace, project


def answer_refusal(principal: Principal, mailbox: Project, question: Message) -> AppError | None:
    """Why ``principal`` may not answer ``question`` from ``mailbox``; None when they may.

    On an anonymous server only when ``AI_MEMORY_ALLOW_ANONYMOUS_ANSWERS`` is on, and a
    ``requires_root`` question never; a ``requires_root`` question only by root; then
    the question must name a ``reply_project`` that exists (one the caller may not read
    counts as missing) and is the project that asked (``reply_verdict`` accepts no reply
    sent elsewhere), and the caller needs write on the mailbox project (the reply is sent
    as it) and on the ``reply_project`` (the reply is delivered there). At most two
    queries. Precondition: ``principal`` may read ``mailbox``; ``question`` is a question.
    """
    decision = decision_of(question)
    refusal = _principal_refusal(principal, decision)
    if refusal is not None:
        return refusal
    target = _reply_target(decision)
    levels = _levels(principal, [mailbox, target]) if target is not None else {}
    return _projects_refusal(decision, mailbox, question, target, levels)


def users_who_may_answer(users: list[User], mailbox: Project, question: Message) -> list[User]:
    """Those of ``users`` whom ``answer_refusal`` would let answer ``question`` from
    ``mailbox`` (whom a notification of it is for), in their order: the same rule, asked
    with two queries however many users (the ``reply_project``, and every user's grants on
    both projects). Precondition: ``question`` is a question."""
    decision = decision_of(question)
    target = _reply_target(decision)
    projects = [mailbox] if target is None else [mailbox, target]
    restricted = [p.pk for p in projects if p.access_mode != Project.AccessMode.OPEN]
    grants: dict[tuple[int, uuid.UUID], str] = {}
    if restricted and users:
        rows = Grant.objects.filter(user__in=users, project_id__in=restricted)
        grants = {
            (user_id, project_id): level
            for user_id, project_id, level in rows.values_list("user_id", "project_id", "level")
        }
    allowed = []
    for user in users:
        principal = Principal.for_user(user)
        if _principal_refusal(principal, decision) is not None:
            continue
        levels = (
            {}
            if target is None
            else {
                project.pk: project_level(principal, project, grants.get((user.pk, project.pk)))
                for project in projects
            }
        )
        if _projects_refusal(decision, mailbox, question, target, levels) is None:
            allowed.append(user)
    return allowed


def _reply_target(decision: Decision) -> Project | None:
    """The project the question's ``reply_project`` names, with its workspace; None when
    it names none that exists. One query, none without a ``reply_project``."""
    reply_project = decision["reply_project"]
    if reply_project is None:
        return None
    workspace, name = _split(reply_project)
    return (
        Project.objects.select_related("workspace")
        .filter(workspace__name=workspace, name=name)
        .first()
    )


def _principal_refusal(principal: Principal, decision: Decision) -> AppError | None:
    """The part of ``answer_refusal`` that asks no query: who the caller is (the
    anonymous server, root)."""
    requires_root = decision["requires_root"]
    if principal.kind == "anonymous":
        if requires_root:
            return Forbidden(
                "this question requires root, and this server runs without authentication, "
                "so nobody here is root: a requires_root question is never answered "
                "anonymously. Turn authentication on and sign in as root.",
                code=Code.ROOT_REQUIRED,
            )
        if not settings.AI_MEMORY_ALLOW_ANONYMOUS_ANSWERS:
            return Forbidden(
                "this server runs without authentication, so the answer page is read-only; "
                "set AI_MEMORY_ALLOW_ANONYMOUS_ANSWERS=1 to answer questions here.",
                code=Code.ANONYMOUS_ANSWERS_OFF,
            )
    elif requires_root and not principal_is_root(principal):
        return Forbidden(
            "this question requires root: only a superuser, or the user named by "
            "AI_MEMORY_ROOT_USERNAME, may answer it.",
            code=Code.ROOT_REQUIRED,
        )
    return None


def _projects_refusal(
    decision: Decision,
    mailbox: Project,
    question: Message,
    target: Project | None,
    levels: dict[uuid.UUID, Level],
) -> AppError | None:
    """The part of ``answer_refusal`` that reads the projects, given what it read:
    ``target``, the project the question's ``reply_project`` names (None when none
    does), and ``levels``, the caller's level on ``mailbox`` and on ``target`` by id."""
    reply_project = decision["reply_project"]
    if reply_project is None:
        return BadRequest(
            "the question names no reply_project (workspace/project), so an answer has "
            "nowhere to go. Ask the asker to send it again with reply_project set.",
            code=Code.REPLY_PROJECT_NOT_FOUND,
        )
    if target is None or levels[target.pk] == Level.NONE:
        return BadRequest(
            f"the question's reply_project {reply_project} was not found (no such project, "
            "or one you may not read), so an answer has nowhere to go. Ask the asker to "
            "send it again with the right reply_project.",
            code=Code.REPLY_PROJECT_NOT_FOUND,
        )
    if target.pk != question.from_project_id:
        return BadRequest(
            f"the question's reply_project {reply_project} is not the project that asked "
            "it, and an answer counts only when it goes back to the project that asked. "
            "Ask the asker to send it again with its own project as reply_project.",
            code=Code.REPLY_PROJECT_NOT_FOUND,
        )
    mailbox_name = f"{mailbox.workspace.name}/{mailbox.name}"
    if levels[mailbox.pk] < Level.WRITE:
        return Forbidden(
            f"the answer is sent as {mailbox_name}, and you have read access to it, not "
            "write. Ask the server operator to raise your access.",
            code=Code.WRITE_ACCESS_REQUIRED,
        )
    if levels[target.pk] < Level.WRITE:
        return Forbidden(
            f"the answer is delivered to {reply_project}, and you have read access to it, "
            "not write. Ask the server operator to raise your access.",
            code=Code.WRITE_ACCESS_REQUIRED,
        )
    return None


def questions_waiting_on(principal: Principal) -> list[Message]:
    """The pending decision questions a signed-in user may answer now, in every project
    they may read (docs/reference.md#waiting-on-you): those ``answer_refusal`` would let
    them answer, soonest deadline first, then those without one; oldest first within.

    Each comes with both projects and their workspaces, without its body. Anyone but a
    signed-in user waits on nothing: an empty list and no query. Otherwise one query,
    however many questions: the questions with their projects and the user's grants on
    both; ``answer_refusal``'s rule is then asked of each with what that query read.
    """
    user = principal.user
    if user is None:
        return []
    questions = (
        Message.objects.pending()
        .filter(decision__isnull=False)
        .select_related("to_project__workspace", "from_project__workspace")
        .defer("body")
    )
    if not principal.sees_everything:
        grants = Grant.objects.filter(user=user)
        questions = questions.filter(
            to_project__in=readable_projects(principal).values("pk")
        ).annotate(
            mailbox_grant=Subquery(
                grants.filter(project=OuterRef("to_project")).values("level")[:1]
            ),
            asker_grant=Subquery(
                grants.filter(project=OuterRef("from_project")).values("level")[:1]
            ),
        )
    waiting: list[tuple[datetime | None, Message]] = []
    for question in questions:
        decision = decision_of(question)
        if _principal_refusal(principal, decision) is not None:
            continue
        mailbox, asker = question.to_project, question.from_project
        # An answer goes only to the project that asked (``answer_refusal``): when
        # reply_project names any other, no project it names could make it answerable.
        asker_name = f"{asker.workspace.name}/{asker.name}"
        target = asker if decision["reply_project"] == asker_name else None
        levels = {
            mailbox.pk: project_level(principal, mailbox, getattr(question, "mailbox_grant", None)),
            asker.pk: project_level(principal, asker, getattr(question, "asker_grant", None)),
        }
        if _projects_refusal(decision, mailbox, question, target, levels) is None:
            waiting.append((question_deadline(question), question))
    waiting.sort(
        key=lambda entry: (
            entry[0] is None,
            entry[0] or entry[1].created_at,
            entry[1].created_at,
            entry[1].pk,
        )
    )
    return [question for _, question in waiting]


@dataclass(frozen=True)
class DecisionPage:
    """What the answer page shows: a question in a mailbox the viewer may read."""

    mailbox: Project
    question: Message  # with from_project__workspace
    sender_readable: bool  # may the viewer read the project that asked
    refusal: AppError | None  # why the viewer may not answer now; None when they may
    earlier: list[Message]  # answers already sent from the mailbox, newest first
    earlier_capped: bool  # more earlier answers exist than ``earlier`` holds
    # The accepted answer to show as ``answered``: the one the viewer just sent, when the
    # URL names it; else, once the question is no longer pending, the one the asker took.
    answered: Message | None

    @property
    def decision(self) -> Decision:
        return decision_of(self.question)

    @property
    def pending(self) -> bool:
        return self.question.is_pending()

    @property
    def may_answer(self) -> bool:
        return self.refusal is None

    @property
    def accepted_earlier(self) -> list[Message]:
        """The earlier answers that count: those the server accepted at send."""
        return [reply for reply in self.earlier if reply_accepted(reply)]


def decision_page(
    principal: Principal,
    workspace: str,
    project: str,
    question_id: uuid.UUID,
    *,
    answered_id: uuid.UUID | None = None,
) -> DecisionPage | None:
    """The answer page of question ``question_id`` in the inbox of ``workspace/project``.

    None (the page is a 404 that shows nothing) when the viewer may not read the mailbox,
    when the id names no decision question in its inbox, and when the question is no
    longer pending and no accepted answer to it was sent from the mailbox. Only an
    accepted answer shows as ``answered``: the one ``answered_id`` names (the page the
    viewer lands on after answering), else for a question no longer pending the one the
    asker took (``decision_answer_taken``). A fixed number of queries whatever the
    question holds and however many answers it has.
    """
    mailbox = readable_projects(principal).filter(workspace__name=workspace, name=project).first()
    if mailbox is None:
        return None
    question = decision_question(mailbox, question_id)
    if question is None:
        return None
    fetched = decision_replies(mailbox, question_id, limit=EARLIER_ANSWERS_LIMIT + 1)
    earlier = fetched[:EARLIER_ANSWERS_LIMIT]
    # The viewer's answer is the newest, or nearly: found among those just read.
    answered = next(
        (reply for reply in earlier if reply.pk == answered_id and reply_accepted(reply)), None
    )
    pending = question.is_pending()
    if not pending and answered is None:
        answered = decision_answer_taken(mailbox, question_id)
        if answered is None:
            return None
    refusal = (
        answer_refusal(principal, mailbox, question)
        if pending
        else not_a_pending_decision(mailbox, question_id)
    )
    sender_readable = principal.sees_everything or (
        readable_projects(principal).filter(pk=question.from_project_id).exists()
    )
    return DecisionPage(
        mailbox=mailbox,
        question=question,
        sender_readable=sender_readable,
        refusal=refusal,
        earlier=earlier,
        earlier_capped=len(fetched) > EARLIER_ANSWERS_LIMIT,
        answered=answered,
    )


@dataclass(frozen=True)
class AnswerLinkPage:
    """What an answer link shows (docs/reference.md#answer-links): its question, the user
    it answers as, and whether it may send now."""

    question: Message  # with both projects and their workspaces
    user: User
    # Whether the user may still read the mailbox; when not, nothing of the question is
    # shown, only that it is closed.
    readable: bool
    # The accepted answer the asker takes (``decision_answer_taken``), when there is one
    # and the user may still answer.
    answered: Message | None
    may_send: bool  # pending, unanswered, and the user may answer it

    @property
    def decision(self) -> Decision:
        return decision_of(self.question)

    @property
    def question_state(self) -> str:
        """The question's state now (``expired`` once its time passed, stored so or not)."""
        return self.question.state_at(timezone.now())

    @property
    def state(self) -> str:
        """``open`` (it may send), ``answered`` or ``closed``."""
        if self.may_send:
            return "open"
        return "answered" if self.answered is not None else "closed"


def answer_link_page(question_id: uuid.UUID, user_id: int) -> AnswerLinkPage | None:
    """The page of an answer link for question ``question_id`` as user ``user_id``; None
    (the link is a 404) when either no longer exists.

    The link may send only while the question is pending with no accepted answer from
    its mailbox and the user may answer it (``answer_refusal``, asked as the user, whoever
    holds the link). A user who lost read on the mailbox is shown that the question is
    closed and nothing else; one who lost the right to answer, that it is closed; else a
    question with an accepted answer shows it, whatever its state. At most six queries.
    """
    question = (
        Message.objects.filter(pk=question_id, decision__isnull=False)
        .select_related("to_project__workspace", "from_project__workspace")
        .first()
    )
    user = User.objects.filter(pk=user_id).first()
    if question is None or user is None:
        return None
    principal = Principal.for_user(user)
    mailbox = question.to_project
    readable = project_level_of(principal, mailbox) > Level.NONE
    refusal = answer_refusal(principal, mailbox, question) if readable else None
    answered = decision_answer_taken(mailbox, question.pk) if readable and refusal is None else None
    return AnswerLinkPage(
        question=question,
        user=user,
        readable=readable,
        answered=answered,
        may_send=readable and refusal is None and answered is None and question.is_pending(),
    )
