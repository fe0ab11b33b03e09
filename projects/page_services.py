"""Page writes: a project's knowledge at paths, written whole. A page is never mail: no
writer here touches messages. The reads and the path rule are ``projects.page_selectors``."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from aimemory_site.lib.errors import BadRequest, Code
from aimemory_site.lib.limits import PAGE_BODY_MAX_CHARS
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.scrubbing import CleanText, text_clean
from projects.access import Level, project_access
from projects.models import Activity, AgentSession, Page, Project
from projects.page_selectors import page_path_parse
from projects.services import activity_record, session_agent


def page_write(
    *,
    principal: Principal,
    workspace: str,
    project: str,
    path: str,
    body: str,
    pinned: bool = False,
    session: AgentSession | None = None,
) -> tuple[str, bool]:
    """Write the page at ``path`` (replacing its body if it exists); return its path and
    whether it is new. Needs write. The body is scrubbed and capped at 16,000 chars;
    Recent Activity records the write, never the body."""
    target = project_access(principal, workspace, project, need=Level.WRITE)
    path = page_path_parse(path)
    clean = _body_clean(body)
    agent = session_agent(session)
    fields = {
        "body": clean.text,
        "pinned": pinned,
        "updated_at": timezone.now(),
        "updated_by_agent": agent,
        "updated_by_user": principal.owner_name or "",
    }
    with transaction.atomic():
        updated = Page.objects.filter(project=target, path=path).update(**fields)
        created = False
        if not updated:
            try:
                # A savepoint: a concurrent first write of the path wins the unique key.
                with transaction.atomic():
                    Page.objects.create(project=target, path=path, **fields)
                created = True
            except IntegrityError:
                Page.objects.filter(project=target, path=path).update(**fields)
        activity_record(
            project=target,
            kind=Activity.Kind.PAGE_WRITTEN,
            actor=f"{principal.display_name} ({agent})",
            summary=f"page {path} {'created' if created else 'updated'}",
        )
    return path, created


def page_create_once(
    *, project: Project, path: str, body: str, actor: str, agent: str, user: str
) -> bool:
    """Create the page at ``path`` unless the project has one there; whether this call
    created it. It never replaces a page: the unique ``(project, path)`` key decides, so
    of racing creates exactly one writes, and a later one changes nothing. The body is
    scrubbed and capped like ``page_write``'s; Recent Activity records a created page as
    written by ``actor``, never its body.

    The server's own write (the decisions register, docs/reference.md#the-decisions-register):
    no caller's access is checked here, so the caller must have decided the page is due.
    Its own transaction (a savepoint inside one): the page's insert and, when it
    inserted, the activity row's.
    """
    path = page_path_parse(path)
    clean = _body_clean(body)
    now = timezone.now()
    try:
        with transaction.atomic():
            Page.objects.create(
                project=project,
                path=path,
                body=clean.text,
                created_at=now,
                updated_at=now,
                updated_by_agent=agent,
                updated_by_user=user,
            )
            activity_record(
                project=project,
                kind=Activity.Kind.PAGE_WRITTEN,
                actor=actor,
                summary=f"page {path} created",
            )
    except IntegrityError:
        return False  # a page is there: the first write stays
    return True


def _body_clean(body: str) -> CleanText:
    """A page body scrubbed and capped at 16,000 chars; an empty one is refused."""
    if not body.strip():
        raise BadRequest("body must not be empty", code=Code.EMPTY_BODY)
    return text_clean(body, cap=PAGE_BODY_MAX_CHARS, label="page body")
