"""Page reads: one page, a project's listing, and the shapes they are answered in, with
the path rule reads and writes share. A page is never mail: no reader here touches
messages, and no message reader touches pages. The writes are ``projects.page_services``."""

from __future__ import annotations

import re
from typing import Any

from django.db.models import QuerySet
from django.db.models.functions import Length

from aimemory_site.lib.errors import BadRequest, Code, NotFound
from aimemory_site.lib.limits import PAGE_LIST_LIMIT
from aimemory_site.lib.principal import Principal
from aimemory_site.lib.timestamps import rfc3339
from projects.access import Level, project_access
from projects.models import Page, Project

PAGE_PATH_MAX_CHARS = 200
_SEGMENT = re.compile(r"[A-Za-z0-9._-]+")


def page_path_parse(path: str) -> str:
    """A page path: 1-200 chars of ``[A-Za-z0-9._-]`` segments joined by ``/``, with no
    empty, ``.`` or ``..`` segment and no leading or trailing ``/``; else 400."""
    segments = path.split("/")
    valid = (
        1 <= len(path) <= PAGE_PATH_MAX_CHARS
        and all(_SEGMENT.fullmatch(segment) for segment in segments)
        and not any(segment in (".", "..") for segment in segments)
    )
    if not valid:
        raise BadRequest(
            f"invalid page path {path[:220]!r}: use 1-{PAGE_PATH_MAX_CHARS} characters, "
            "segments of letters, digits, '.', '_' or '-' joined by '/', no empty, '.' or "
            "'..' segment, no leading or trailing '/'",
            code=Code.INVALID_PAGE_PATH,
        )
    return path


def page_read(*, principal: Principal, workspace: str, project: str, path: str) -> Page | None:
    """The page at ``path``, or None. Needs read."""
    target = project_access(principal, workspace, project, need=Level.READ)
    return Page.objects.filter(project=target, path=page_path_parse(path)).first()


def page_list(
    *, principal: Principal, workspace: str, project: str, prefix: str | None = None
) -> list[Page]:
    """The project's pages in path order (at most 200), without bodies. Needs read.

    A ``prefix`` longer than a path can be is 400 ``invalid_page_path``: it could match
    nothing, and the database would be handed a pattern of any length (SQLite gives up
    on one of some 50,000 characters as too complex).
    """
    target = project_access(principal, workspace, project, need=Level.READ)
    if prefix is not None and len(prefix) > PAGE_PATH_MAX_CHARS:
        raise BadRequest(
            f"page prefix of {len(prefix)} characters: a page path has at most "
            f"{PAGE_PATH_MAX_CHARS}, so no page could match; pass at most "
            f"{PAGE_PATH_MAX_CHARS} characters",
            code=Code.INVALID_PAGE_PATH,
        )
    pages = pages_of(target)
    if prefix:
        pages = pages.filter(path__startswith=prefix)
    return list(pages.order_by("path")[:PAGE_LIST_LIMIT])


def pages_of(project: Project) -> QuerySet[Page]:
    """The pages of a project whose access the caller checked, with ``chars``, no body."""
    return Page.objects.filter(project=project).defer("body").annotate(chars=Length("body"))


def page_not_found(path: str) -> NotFound:
    return NotFound(f"no page at {path!r}", code=Code.PAGE_NOT_FOUND)


def page_payload(page: Page) -> dict[str, Any]:
    """A page as ``memory_read_page`` and ``GET /api/v1/pages/read`` answer it."""
    return {
        "path": page.path,
        "body": page.body,
        "pinned": page.pinned,
        "updated_at": rfc3339(page.updated_at),
        "updated_by_agent": page.updated_by_agent,
        "updated_by_user": page.updated_by_user or None,
    }


def page_row(page: Page) -> dict[str, Any]:
    """A page of ``page_list`` in a listing: no body, its length."""
    chars: int = page.chars  # type: ignore[attr-defined]  # annotated by pages_of
    return {
        "path": page.path,
        "pinned": page.pinned,
        "updated_at": rfc3339(page.updated_at),
        "chars": chars,
    }
