"""Page writes: a project's knowledge at paths, written whole. A page is never mail: no
writer here touches messages. The reads and the path rule are ``projects.page_selectors``."""

from __future__ import annotations

from django.db import IntegrityError, transaction
from django.utils import timezone

from aimemory_site.lib.errors import BadRequest, Code
from aimemory_site.lib.limits import PAGE_BODY_MAX_CHARS
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.scrubbing import text_clean
from projects.access import Level, project_access
from projects.models import Activity, AgentSession, Page
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
    if not body.strip():
        raise BadRequest("body must not be empty", code=Code.EMPTY_BODY)
    clean = text_clean(body, cap=PAGE_BODY_MAX_CHARS, label="page body")
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
