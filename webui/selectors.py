"""Reads for the web pages, each a fixed number of queries whatever the data's size.

Every read goes through ``readable_projects``: a project the viewer may not read is
neither shown, nor counted, nor named as a sender or counterpart.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict
from uuid import UUID

from django.db.models import OuterRef, QuerySet, Subquery
from django.urls import reverse
from django.utils import timezone

from aimemory_site.lib.errors import BadRequest, NotFound
from aimemory_site.lib.limits import LIST_LIMIT_MAX, PAGE_LIST_LIMIT
from aimemory_site.lib.principal import Principal
from messaging.answer_selectors import (
    decision_answer_taken,
    decision_of,
    question_deadline,
    questions_waiting_on,
)
from messaging.models import Message
from messaging.payloads import decision_reply_payload
from messaging.search import SearchHit, message_search, message_thread
from messaging.selectors import message_pending_count, message_status, pending_count_expression
from projects.access import readable_among, readable_projects
from projects.models import Activity, Page, Project
from projects.page_selectors import pages_of

MAILBOX_LIMIT = 5
SUMMARY_NAMED_LIMIT = 5
SNIPPET_CHARS = 160
RECENT_ACTIVITY_LIMIT = 20
PAGES_LIMIT = PAGE_LIST_LIMIT  # as many as `ai-memory page list` shows at a time
SEARCH_LIMIT = 20  # hits on the project page (docs/operating.md#the-web-mailbox)


@dataclass(frozen=True)
class ProjectName:
    """A project by its names, as a page shows and links it."""

    workspace: str
    project: str

    @property
    def label(self) -> str:
        return f"{self.workspace}/{self.project}"

    @property
    def url(self) -> str:
        """The project page's address: ``reverse`` once, then a string format per name.

        A home page links a thousand projects; reversing each one cost a third of its
        render time. Names are ``[A-Za-z0-9._-]`` (docs/architecture.md#data-model), so they need no
        quoting in a path.
        """
        return _project_url_pattern().format(workspace=self.workspace, project=self.project)

    def message_url(self, message_id: UUID) -> str:
        """The address of a message's page in this project."""
        return reverse("webui:message", args=[self.workspace, self.project, message_id])


@functools.cache
def _project_url_pattern() -> str:
    return (
        reverse("webui:project", args=["WORKSPACE", "PROJECT"])
        .replace("WORKSPACE", "{workspace}")
        .replace("PROJECT", "{project}")
    )


class InboxCard(TypedDict):
    """A project's pending count as the home page's badge and summary show it.

    A dict, not a dataclass: the template looks up six fields of each of a thousand cards,
    and Django's lookup tries ``card[key]`` first, which a dict answers, where an object
    raises TypeError before ``getattr`` answers; that cost a quarter of the render.
    """

    workspace: str
    project: str
    url: str  # the project page
    pending: int


class ProjectCard(InboxCard):
    """A home page card: the inbox card and the project's latest activity."""

    last_activity_at: datetime | None
    last_activity_summary: str


@dataclass(frozen=True)
class WorkspaceCards:
    workspace: str
    cards: list[ProjectCard]


@dataclass(frozen=True)
class InboxSummary:
    """The home page's one-line total: the projects holding most mail, then how many more."""

    total: int
    named: list[InboxCard]
    more: int


@dataclass(frozen=True)
class WaitingQuestion:
    """A question on the home page's "Waiting on you" (docs/reference.md#waiting-on-you)."""

    question: str  # the body's question, untrusted text, escaped like any
    asker: ProjectName
    mailbox: ProjectName
    requires_root: bool
    deadline: datetime | None
    created_at: datetime
    url: str  # its answer page


@dataclass(frozen=True)
class HomePage:
    workspaces: list[WorkspaceCards]
    summary: InboxSummary | None  # None when no message waits in any readable project
    waiting: list[WaitingQuestion]  # empty for no question, and for anyone not signed in


@dataclass(frozen=True)
class HomeInbox:
    """The live parts of the home page (docs/operating.md#the-web-mailbox): every card's badge, the
    summary and "Waiting on you", without the activity the cards also show."""

    cards: list[InboxCard]  # in the home page's order
    summary: InboxSummary | None
    waiting: list[WaitingQuestion]


@dataclass(frozen=True)
class MailboxRow:
    id: UUID  # a pending question links to its answer page with it
    subject: str  # empty when the sender gave none
    sender: ProjectName | None  # None when the viewer may not read the sending project
    snippet: str  # of the body; of a question's details (empty when none)
    created_at: datetime
    in_reply_to: UUID | None = None  # the message this one answers, when it says
    # The decision convention's question (docs/reference.md#operator-decisions), read at send: untrusted
    # text from the body, escaped like the snippet.
    decision: dict[str, Any] | None = None
    # An answer to a question, with the server's verdict on it (accepted, refusal).
    decision_reply: dict[str, Any] | None = None


@dataclass(frozen=True)
class Mailbox:
    rows: list[MailboxRow]
    total: int

    @property
    def capped(self) -> bool:
        return self.total > len(self.rows)


@dataclass(frozen=True)
class ActivityRow:
    kind: str
    detail: str  # the summary, or empty when it only repeats the kind ("message sent")
    actor: str
    created_at: datetime
    # The other side of a message: "to" for a send, "from" otherwise; empty when none.
    counterpart_direction: str
    counterpart: ProjectName | None  # None when absent or when the viewer may not read it


@dataclass(frozen=True)
class PageRow:
    """A page in the project page's list: never its body."""

    path: str
    pinned: bool
    updated_at: datetime
    chars: int


@dataclass(frozen=True)
class PageList:
    rows: list[PageRow]  # pinned first, then by path
    capped: bool  # more pages exist than the list shows


@dataclass(frozen=True)
class SnippetPart:
    """A run of a search snippet's text; ``match`` for a run the search matched (the text
    between ``[`` and ``]``). Plain text either way: the template escapes it, and only then
    wraps a match in ``<mark>``."""

    text: str
    match: bool


@dataclass(frozen=True)
class MessageLink:
    """A message in a list that links to its page (search hits, a thread): no body."""

    id: UUID
    url: str  # its message page
    subject: str  # empty when the sender gave none
    # "from" the sender for a message of the project's inbox, "to" the recipient for one
    # of its outbox; ``counterpart`` is that project, None when the viewer may not read it.
    direction: str
    counterpart: ProjectName | None
    state: str  # as every surface shows it now: a pending message past its expiry is expired
    created_at: datetime


@dataclass(frozen=True)
class SearchRow:
    link: MessageLink
    snippet: list[SnippetPart]


@dataclass(frozen=True)
class SearchResults:
    """The project page's search (docs/operating.md#the-web-mailbox): the hits of its inbox and
    outbox, best match first, or the error that refused the query."""

    query: str
    rows: list[SearchRow]
    error: str = ""  # the message of a refused query (over 500 characters); empty otherwise

    @property
    def limit(self) -> int:
        return SEARCH_LIMIT

    @property
    def capped(self) -> bool:
        """As many hits as the page shows: more may match."""
        return len(self.rows) >= SEARCH_LIMIT


@dataclass(frozen=True)
class ProjectPage:
    """A project page. ``name`` is None when the URL names no project; for a project that
    is missing or unreadable it holds the names the URL gave, and the page stays empty."""

    name: ProjectName | None
    mailbox: Mailbox
    activity: list[ActivityRow]
    pages: PageList
    search: SearchResults | None = None  # None when the page was asked no query

    @property
    def cli_list_limit(self) -> int:
        """The CLI lists at most this many at a time; the capped mailbox points to it."""
        return LIST_LIMIT_MAX


@dataclass(frozen=True)
class ProjectLiveRegions:
    """The live parts of a project page (docs/operating.md#the-web-mailbox): its Mailbox and
    its Recent Activity, as empty for a project that is missing or unreadable as on the
    page itself."""

    name: ProjectName
    mailbox: Mailbox
    activity: list[ActivityRow]

    @property
    def cli_list_limit(self) -> int:
        return LIST_LIMIT_MAX


def _name_of(project: Project) -> ProjectName:
    """Precondition: ``project`` came with its workspace (``select_related``)."""
    return ProjectName(workspace=project.workspace.name, project=project.name)


def _readable_in_page_order(principal: Principal) -> QuerySet[Project]:
    """The projects ``principal`` may read, in the home page's order."""
    return readable_projects(principal).order_by("workspace__name", "name")


def home_page(principal: Principal) -> HomePage:
    """The viewer's project cards grouped by workspace, the pending-mail summary, and the
    questions waiting on a signed-in viewer.

    One query: the readable projects with their latest activity and pending count; for a
    signed-in user one more, ``waiting_on_you``'s.
    """
    latest = Activity.objects.filter(project=OuterRef("pk")).order_by("-created_at", "-id")
    # Rows, not model instances: building a Project and a Workspace per card cost more
    # than the query at a thousand projects.
    rows = (
        _readable_in_page_order(principal)
        .annotate(
            pending=pending_count_expression(),
            last_activity_at=Subquery(latest.values("created_at")[:1]),
            last_activity_summary=Subquery(latest.values("summary")[:1]),
        )
        .values_list(
            "workspace__name", "name", "pending", "last_activity_at", "last_activity_summary"
        )
    )
    cards = [
        ProjectCard(
            workspace=workspace,
            project=name,
            url=ProjectName(workspace, name).url,
            pending=pending,
            last_activity_at=last_at,
            last_activity_summary=last_summary or "",
        )
        for workspace, name, pending, last_at, last_summary in rows
    ]
    workspaces = [
        WorkspaceCards(workspace=workspace, cards=list(group))
        for workspace, group in itertools.groupby(cards, key=lambda card: card["workspace"])
    ]
    return HomePage(
        workspaces=workspaces, summary=_inbox_summary(cards), waiting=waiting_on_you(principal)
    )


def home_inbox(principal: Principal) -> HomeInbox:
    """What ``home_page`` shows of pending mail: the same projects, counts and summary,
    and the same questions waiting on the viewer.

    The home page's queries, its first without the latest activity.
    """
    rows = (
        _readable_in_page_order(principal)
        .annotate(pending=pending_count_expression())
        .values_list("workspace__name", "name", "pending")
    )
    cards = [
        InboxCard(
            workspace=workspace,
            project=name,
            url=ProjectName(workspace, name).url,
            pending=pending,
        )
        for workspace, name, pending in rows
    ]
    return HomeInbox(cards=cards, summary=_inbox_summary(cards), waiting=waiting_on_you(principal))


def waiting_on_you(principal: Principal) -> list[WaitingQuestion]:
    """The pending questions a signed-in viewer may answer, in every project, soonest
    deadline first, then oldest (``questions_waiting_on``): one query, none for a viewer
    who is not signed in."""
    waiting = []
    for question in questions_waiting_on(principal):
        decision = decision_of(question)
        mailbox = _name_of(question.to_project)
        waiting.append(
            WaitingQuestion(
                question=decision["question"],
                asker=_name_of(question.from_project),
                mailbox=mailbox,
                requires_root=decision["requires_root"],
                deadline=question_deadline(question),
                created_at=question.created_at,
                url=reverse(
                    "webui:decision", args=[mailbox.workspace, mailbox.project, question.pk]
                ),
            )
        )
    return waiting


def _inbox_summary(cards: Sequence[InboxCard]) -> InboxSummary | None:
    holding_mail = sorted(
        (card for card in cards if card["pending"]),
        key=lambda card: (-card["pending"], card["workspace"], card["project"]),
    )
    if not holding_mail:
        return None
    return InboxSummary(
        total=sum(card["pending"] for card in holding_mail),
        named=holding_mail[:SUMMARY_NAMED_LIMIT],
        more=max(0, len(holding_mail) - SUMMARY_NAMED_LIMIT),
    )


def snippet(body: str) -> str:
    """The body on one line (whitespace runs collapsed), cut to 160 characters plus '…'."""
    line = " ".join(body.split())
    if len(line) <= SNIPPET_CHARS:
        return line
    return line[:SNIPPET_CHARS] + "…"


def _row_snippet(message: Message) -> str:
    """A message's snippet; for a question its details and for an answer its comment:
    their bodies are fields the row already shows parsed."""
    if message.decision is not None:
        return snippet(message.decision.get("details") or "")
    if message.decision_reply is not None:
        return snippet(message.decision_reply.get("comment") or "")
    return snippet(message.body)


def project_page(
    principal: Principal, workspace: str | None, project: str | None, query: str = ""
) -> ProjectPage:
    """The Mailbox, Pages and Recent Activity of the named project, as ``principal`` may
    see them, and with a ``query`` the search of its inbox and outbox.

    A URL that names no project, a project that does not exist and one the viewer may not
    read all give the same empty page (apart from the names the URL itself carried), so
    the page never hints that a restricted project exists: a search there finds nothing.
    Names match exactly: no alias. Never changes a message: rendering the mailbox is not a
    pop, and a search claims nothing.
    """
    query = query.strip()
    if workspace is None or project is None:
        return _empty_page(None)
    # Asked whether or not the project is there, so that a refused query is refused alike.
    hits, error = _search(principal, workspace, project, query) if query else ([], "")
    found = _readable_project(principal, workspace, project)
    if found is None:
        nothing = SearchResults(query=query, rows=[], error=error) if query else None
        return _empty_page(ProjectName(workspace=workspace, project=project), nothing)
    regions = _live_regions_read(
        principal, found, (_other_side_id(hit.message, found.pk) for hit in hits)
    )
    readable = regions.readable
    name = _name_of(found)
    now = timezone.now()
    rows = [_search_row(hit, query, name, found.pk, readable, now) for hit in hits]
    return ProjectPage(
        name=name,
        mailbox=_mailbox(regions.messages, regions.total, readable),
        activity=[_activity_row(entry, readable) for entry in regions.activities],
        pages=_page_list(found),
        search=SearchResults(query=query, rows=rows, error=error) if query else None,
    )


def _search(
    principal: Principal, workspace: str, project: str, query: str
) -> tuple[list[SearchHit], str]:
    """The hits of the project's inbox and outbox, or the message of the error that refused
    the query. A project the viewer may not read finds nothing, as a missing one does."""
    try:
        hits = message_search(
            principal,
            workspace=workspace,
            project=project,
            query=query,
            box="all",
            limit=SEARCH_LIMIT,
        )
    except NotFound:
        return [], ""
    except BadRequest as error:
        return [], error.message
    return hits, ""


def _other_side_id(message: Message, project_id: UUID) -> UUID:
    """The project at the other end of ``message`` from ``project_id``'s."""
    return message.from_project_id if message.to_project_id == project_id else message.to_project_id


def _message_link(
    message: Message, name: ProjectName, project_id: UUID, readable: set[UUID], now: datetime
) -> MessageLink:
    """``message`` as a link from the page of ``name`` (whose project is ``project_id``).

    Precondition: ``message`` came with both projects' workspaces selected, and
    ``readable`` holds each other side the viewer may read.
    """
    inbound = message.to_project_id == project_id
    other = message.from_project if inbound else message.to_project
    return MessageLink(
        id=message.pk,
        url=name.message_url(message.pk),
        subject=message.subject,
        direction="from" if inbound else "to",
        counterpart=_name_of(other) if other.pk in readable else None,
        state=message.state_at(now),
        created_at=message.created_at,
    )


def _search_row(
    hit: SearchHit,
    query: str,
    name: ProjectName,
    project_id: UUID,
    readable: set[UUID],
    now: datetime,
) -> SearchRow:
    return SearchRow(
        link=_message_link(hit.message, name, project_id, readable, now),
        snippet=[SnippetPart(text=text, match=match) for text, match in hit.parts()],
    )


@dataclass(frozen=True)
class _LiveRegionsRead:
    messages: list[Message]
    total: int
    activities: list[Activity]
    readable: set[UUID]


def _live_regions_read(
    principal: Principal, found: Project, others: Iterable[UUID] = ()
) -> _LiveRegionsRead:
    """What the Mailbox and Recent Activity of ``found`` show, for the page and its live
    fragment alike, and which of their projects (and of ``others``) the viewer may read:
    one query for the senders, the counterparts and the others together."""
    messages = _mailbox_messages(found)
    activities = _recent_activity(found)
    readable = readable_among(
        principal,
        itertools.chain(
            (message.from_project_id for message in messages),
            (entry.counterpart_id for entry in activities if entry.counterpart_id is not None),
            others,
        ),
    )
    return _LiveRegionsRead(messages, message_pending_count(project=found), activities, readable)


def project_live_regions(principal: Principal, workspace: str, project: str) -> ProjectLiveRegions:
    """The Mailbox and the Recent Activity that ``project_page`` shows for the same names
    and viewer, read as it reads them.

    A project that does not exist and one the viewer may not read give the same empty
    regions, as on the page. Never changes a message.
    """
    found = _readable_project(principal, workspace, project)
    if found is None:
        return ProjectLiveRegions(
            name=ProjectName(workspace=workspace, project=project),
            mailbox=Mailbox(rows=[], total=0),
            activity=[],
        )
    regions = _live_regions_read(principal, found)
    return ProjectLiveRegions(
        name=_name_of(found),
        mailbox=_mailbox(regions.messages, regions.total, regions.readable),
        activity=[_activity_row(entry, regions.readable) for entry in regions.activities],
    )


def _readable_project(principal: Principal, workspace: str, project: str) -> Project | None:
    """The named project if ``principal`` may read it; names match exactly (no alias)."""
    return readable_projects(principal).filter(workspace__name=workspace, name=project).first()


def _recent_activity(project: Project) -> list[Activity]:
    """The project's latest activity, newest first, with its counterparts: one query."""
    return list(
        Activity.objects.filter(project=project)
        .select_related("counterpart__workspace")
        .order_by("-created_at", "-id")[:RECENT_ACTIVITY_LIMIT]
    )


def _mailbox_messages(project: Project) -> list[Message]:
    """The oldest pending messages of the inbox, with their senders: one query."""
    return list(
        Message.objects.pending()
        .inbox_of(project)
        .select_related("from_project__workspace")
        .oldest_first()[:MAILBOX_LIMIT]
    )


def _mailbox(messages: list[Message], total: int, readable: set[UUID]) -> Mailbox:
    """Precondition: ``readable`` holds each sender the viewer may read."""
    rows = [
        MailboxRow(
            id=message.pk,
            subject=message.subject,
            sender=_name_of(message.from_project) if message.from_project_id in readable else None,
            snippet=_row_snippet(message),
            created_at=message.created_at,
            in_reply_to=message.in_reply_to,
            decision=message.decision,
            decision_reply=decision_reply_payload(message.decision_reply),
        )
        for message in messages
    ]
    return Mailbox(rows=rows, total=total)


def _empty_page(name: ProjectName | None, search: SearchResults | None = None) -> ProjectPage:
    return ProjectPage(
        name=name,
        mailbox=Mailbox(rows=[], total=0),
        activity=[],
        pages=PageList(rows=[], capped=False),
        search=search,
    )


def _page_list(project: Project) -> PageList:
    """The project's pages, pinned first, then by path: one query, no body loaded (one
    more than shown is fetched, to tell whether the list is capped)."""
    found = list(pages_of(project).order_by("-pinned", "path")[: PAGES_LIMIT + 1])
    rows = [
        PageRow(
            path=page.path,
            pinned=page.pinned,
            updated_at=page.updated_at,
            chars=page.chars,  # type: ignore[attr-defined]  # annotated by pages_of
        )
        for page in found[:PAGES_LIMIT]
    ]
    return PageList(rows=rows, capped=len(found) > PAGES_LIMIT)


@dataclass(frozen=True)
class PageView:
    """One page of a project, read-only. ``page`` is None both when there is no page at
    the path and when the viewer may not read the project, so the two look the same."""

    name: ProjectName
    path: str
    page: Page | None


def page_view(principal: Principal, workspace: str, project: str, path: str) -> PageView:
    """The page at ``path`` in the named project, if ``principal`` may read the project.

    One query: the page, its project among the readable ones. Names and path match
    exactly (no alias, no normalising), so a path no page may hold simply finds nothing.
    """
    found = Page.objects.filter(
        project__in=readable_projects(principal),
        project__workspace__name=workspace,
        project__name=project,
        path=path,
    ).first()
    return PageView(name=ProjectName(workspace=workspace, project=project), path=path, page=found)


def _activity_row(entry: Activity, readable: set[UUID]) -> ActivityRow:
    """Precondition: ``entry`` came with ``counterpart__workspace`` selected."""
    counterpart = entry.counterpart
    direction = ""
    if counterpart is not None:
        direction = "to" if entry.kind == Activity.Kind.MESSAGE_SENT else "from"
    shown = counterpart is not None and counterpart.pk in readable
    kind = entry.get_kind_display()
    return ActivityRow(
        kind=kind,
        detail="" if entry.summary == kind else entry.summary,
        actor=entry.actor,
        created_at=entry.created_at,
        counterpart_direction=direction,
        counterpart=_name_of(counterpart) if counterpart is not None and shown else None,
    )


@dataclass(frozen=True)
class TakenAnswer:
    """The accepted answer the asker took, shown on a question's message page once the
    question is no longer pending (docs/operating.md#the-web-mailbox)."""

    option: str
    comment: str  # the person's words, untrusted text, escaped like any; may be empty
    by_user: str  # who answered (the reply's from_owner_user); empty when no person did
    # The project it was sent from (the question's mailbox); None when the viewer may not read it.
    mailbox: ProjectName | None
    url: str  # the reply's message page, in the same project as the question's


@dataclass(frozen=True)
class MessagePage:
    """One message of a project, with its thread (docs/operating.md#the-web-mailbox): read-only."""

    name: ProjectName
    message: Message  # the whole row: its body is shown, fenced and escaped
    state: str  # as every surface shows it now
    sender: ProjectName | None  # None when the viewer may not read the sending project
    recipient: ProjectName | None  # None when the viewer may not read the receiving project
    inbound: bool  # the project is the recipient
    # The in_reply_to chain (docs/reference.md#search-and-threads), oldest first: only
    # messages of this project, each linked to its page; the message itself among them.
    thread: list[MessageLink]
    in_reply_to_url: str | None  # the page of the message this one answers, when shown
    decision_url: str | None  # the answer page of a question in this project's inbox
    # For a question no longer pending (taken, withdrawn, expired), the answer the asker took.
    answer: TakenAnswer | None = None


def message_page(
    principal: Principal, workspace: str, project: str, message_id: UUID
) -> MessagePage | None:
    """The message ``message_id`` of the named project with its thread, or None.

    None for an id that names no message whose sender or recipient is the project, for a
    project that does not exist, and for one the viewer may not read, so all look the
    same. The message comes from ``message_status``'s lookup (the access rule and the
    lookup of a status, which loads the whole row, body included), the thread from
    ``message_thread``'s. Never changes a message.
    """
    wanted = str(message_id)
    try:
        message = message_status(
            principal=principal, workspace=workspace, project=project, message_id=wanted
        )
        thread = message_thread(principal, workspace=workspace, project=project, message_id=wanted)
    except NotFound:
        return None
    inbound = (message.to_project.workspace.name, message.to_project.name) == (workspace, project)
    here = message.to_project if inbound else message.from_project
    name = _name_of(here)
    readable = readable_among(
        principal,
        itertools.chain(
            (message.from_project_id, message.to_project_id),
            (_other_side_id(entry, here.pk) for entry in thread),
        ),
    )
    now = timezone.now()
    links = [_message_link(entry, name, here.pk, readable, now) for entry in thread]
    shown = {link.id for link in links}
    state = message.state_at(now)
    return MessagePage(
        name=name,
        message=message,
        state=state,
        sender=_name_of(message.from_project) if message.from_project_id in readable else None,
        recipient=_name_of(message.to_project) if message.to_project_id in readable else None,
        inbound=inbound,
        thread=links,
        in_reply_to_url=name.message_url(message.in_reply_to)
        if message.in_reply_to is not None and message.in_reply_to in shown
        else None,
        decision_url=reverse("webui:decision", args=[name.workspace, name.project, message.pk])
        if inbound and message.decision is not None
        else None,
        answer=_taken_answer(message, name, readable)
        if message.decision is not None and state != Message.State.PENDING
        else None,
    )


def _taken_answer(question: Message, name: ProjectName, readable: set[UUID]) -> TakenAnswer | None:
    """The answer to ``question`` that its asker took (``decision_answer_taken``: the same
    one the answer page shows as ``answered``), as seen from the page of ``name``, one of
    the question's two projects; None when no accepted answer was sent. One query.

    The answer goes from the question's mailbox to the asker, so it is in the inbox or the
    outbox of either project and its message page is in the same project as the question's.
    Precondition: ``question`` is a question, with both projects and their workspaces, and
    ``readable`` holds each of them the viewer may read.
    """
    mailbox = question.to_project
    reply = decision_answer_taken(mailbox, question.pk)
    if reply is None or reply.decision_reply is None:
        return None
    return TakenAnswer(
        option=reply.decision_reply.get("option") or "",
        comment=reply.decision_reply.get("comment") or "",
        by_user=reply.from_owner_user,
        mailbox=_name_of(mailbox) if mailbox.pk in readable else None,
        url=name.message_url(reply.pk),
    )
