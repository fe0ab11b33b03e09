"""The handoff and page MCP tools: thin adapters over the handoff and page services and
selectors. Descriptions are short on purpose: every agent pays for them."""

from __future__ import annotations

from typing import Any

from aimemory_site.lib.mcp_tool import (
    OWN_PROJECT,
    OWN_WORKSPACE,
    READS,
    WRITES,
    Tool,
    ToolCall,
    object_schema,
)
from projects.handoff_services import handoff_create
from projects.page_selectors import page_list, page_payload, page_read, page_row
from projects.page_services import page_write
from projects.scope import scope_annotate, scope_of_call, scope_require_named


def handoff(call: ToolCall) -> dict[str, Any]:
    scope = scope_of_call(call)
    scope_require_named(scope, "handoff")
    created = handoff_create(
        principal=call.principal,
        workspace=scope.workspace,
        project=scope.project,
        body=call.required_text("body"),
        session=scope.session,
    )
    return {"handoff_id": str(created.id)}


def write_page(call: ToolCall) -> dict[str, Any]:
    scope = scope_of_call(call)
    scope_require_named(scope, "write_page")
    path, created = page_write(
        principal=call.principal,
        workspace=scope.workspace,
        project=scope.project,
        path=call.required_text("path"),
        body=call.required_text("body"),
        pinned=call.boolean("pinned"),
        session=scope.session,
    )
    return {"path": path, "created": created}


def read_page(call: ToolCall) -> dict[str, Any]:
    scope = scope_of_call(call)
    page = page_read(
        principal=call.principal,
        workspace=scope.workspace,
        project=scope.project,
        path=call.required_text("path"),
    )
    return scope_annotate({"page": page_payload(page) if page is not None else None}, scope)


def list_pages(call: ToolCall) -> dict[str, Any]:
    scope = scope_of_call(call)
    pages = page_list(
        principal=call.principal,
        workspace=scope.workspace,
        project=scope.project,
        prefix=call.text("prefix"),
    )
    return scope_annotate({"pages": [page_row(page) for page in pages]}, scope)


_PATH = {"type": "string", "description": "e.g. notes/api.md; _rules/ and _slots/ go in the brief."}

PROJECT_TOOLS = (
    Tool(
        name="memory_handoff_create",
        description=(
            "Leave a note for the next session of your project (done, open questions, next "
            "steps, files touched); it gets it once, at its start. Not mail."
        ),
        input_schema=object_schema(
            {
                "body": {"type": "string", "description": "The note."},
                "workspace": OWN_WORKSPACE,
                "project": OWN_PROJECT,
            },
            "body",
        ),
        handler=handoff,
        annotations=WRITES,
    ),
    Tool(
        name="memory_write_page",
        description=(
            "Write your project's page at path (replaces it). Knowledge, not mail; pinned "
            "pages open every session's brief."
        ),
        input_schema=object_schema(
            {
                "path": _PATH,
                "body": {"type": "string", "description": "Markdown; secrets redacted."},
                "pinned": {"type": "boolean", "description": "In the brief."},
                "workspace": OWN_WORKSPACE,
                "project": OWN_PROJECT,
            },
            "path",
            "body",
        ),
        handler=write_page,
        annotations=WRITES,
    ),
    Tool(
        name="memory_read_page",
        description="Read a page of your project; null when there is none.",
        input_schema=object_schema(
            {"path": _PATH, "workspace": OWN_WORKSPACE, "project": OWN_PROJECT}, "path"
        ),
        handler=read_page,
        annotations=READS,
    ),
    Tool(
        name="memory_list_pages",
        description="List your project's pages (path, pinned, date, size), path order.",
        input_schema=object_schema(
            {
                "prefix": {"type": "string", "description": "Only paths starting so."},
                "workspace": OWN_WORKSPACE,
                "project": OWN_PROJECT,
            }
        ),
        handler=list_pages,
        annotations=READS,
    ),
)
