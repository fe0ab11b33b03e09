"""JSON API routes of the projects app: handoffs and pages. Thin adapters: each calls the
service or selector that holds the rule. The session start, the hook block and the
briefing are the on-start composition's (``aimemory_site.onstart.api``)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from ninja import Router

from aimemory_site.lib.api import NameText, PagePathText, errors, principal_of
from projects.handoff_selectors import handoff_list, handoff_row
from projects.handoff_services import handoff_create
from projects.page_selectors import page_list, page_not_found, page_payload, page_read, page_row
from projects.page_services import page_write
from projects.schemas import (
    HandoffCreateIn,
    HandoffCreateOut,
    HandoffListOut,
    PageListOut,
    PageReadOut,
    PageWriteIn,
    PageWriteOut,
)

router = Router()


@router.post(
    "/handoffs", response={201: HandoffCreateOut, **errors(404, body=True)}, tags=["handoffs"]
)
def handoffs_create(request: HttpRequest, payload: HandoffCreateIn) -> HttpResponse:
    """Leave a single-use note for the next session of the project (needs write)."""
    created = handoff_create(
        principal=principal_of(request),
        workspace=payload.workspace,
        project=payload.project,
        body=payload.body,
    )
    return JsonResponse({"handoff_id": str(created.id)}, status=201)


@router.get("/handoffs", response={200: HandoffListOut, **errors(404)}, tags=["handoffs"])
def handoffs_list(request: HttpRequest, workspace: NameText, project: NameText) -> HttpResponse:
    """The project's handoffs, newest first, at most 50, without bodies; claims nothing."""
    handoffs = handoff_list(principal=principal_of(request), workspace=workspace, project=project)
    return JsonResponse({"handoffs": [handoff_row(h) for h in handoffs]})


@router.post(
    "/pages",
    response={201: PageWriteOut, 200: PageWriteOut, **errors(404, body=True)},
    tags=["pages"],
)
def pages_write(request: HttpRequest, payload: PageWriteIn) -> HttpResponse:
    """Write a project page: 201 when new, 200 when its body was replaced (needs write)."""
    path, created = page_write(
        principal=principal_of(request),
        workspace=payload.workspace,
        project=payload.project,
        path=payload.path,
        body=payload.body,
        pinned=payload.pinned,
    )
    return JsonResponse({"path": path, "created": created}, status=201 if created else 200)


@router.get("/pages", response={200: PageListOut, **errors(404)}, tags=["pages"])
def pages_list(
    request: HttpRequest, workspace: NameText, project: NameText, prefix: str = ""
) -> HttpResponse:
    """The project's pages in path order (at most 200), without bodies."""
    pages = page_list(
        principal=principal_of(request), workspace=workspace, project=project, prefix=prefix
    )
    return JsonResponse({"pages": [page_row(page) for page in pages]})


@router.get("/pages/read", response={200: PageReadOut, **errors(404)}, tags=["pages"])
def pages_read(
    request: HttpRequest, workspace: NameText, project: NameText, path: PagePathText
) -> HttpResponse:
    """One page with its body; 404 ``page_not_found`` when there is none at the path."""
    page = page_read(
        principal=principal_of(request), workspace=workspace, project=project, path=path
    )
    if page is None:
        raise page_not_found(path)
    return JsonResponse({"page": page_payload(page)})
