"""Pages (docs/reference.md#the-on-start-block): the path rule, writes that replace, reads, lists, the MCP
tools, and that a page is never mail nor mail a page."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from aimemory_site.lib.errors import BadRequest
from messaging.models import Message
from projects.models import Activity, Page, Project
from projects.page_services import page_create_once
from tests.conftest import SEND, A, ApiCall, B
from tests.mcp_raw import RawMcp

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _projects(project_a: Project, project_b: Project) -> None:
    """default/project-a and default/project-b exist."""


def _write(api: ApiCall, path: str, body: str = "# Notes\n\nsome text", **extra: object) -> int:
    status, answer = api("post", "/api/v1/pages", {**A, "path": path, "body": body, **extra})
    assert status in (200, 201), answer
    return status


@pytest.mark.parametrize(
    "path",
    ["notes", "notes/api.md", "_rules/style", "_slots/now", "a.b-c_d/e", "x" * 200],
)
def test_good_paths_are_written(api: ApiCall, path: str) -> None:
    assert _write(api, path) == 201
    assert Page.objects.get().path == path


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/notes",
        "notes/",
        "a//b",
        ".",
        "..",
        "a/../b",
        "a/./b",
        "with space",
        "semi;colon",
        "ünïcode",
        "x" * 201,
    ],
)
def test_bad_paths_are_refused_and_write_nothing(api: ApiCall, path: str) -> None:
    status, answer = api("post", "/api/v1/pages", {**A, "path": path, "body": "x"})

    assert status == 400
    assert answer["code"] == "invalid_page_path"
    assert not Page.objects.exists()


def test_writing_an_existing_path_replaces_its_body(api: ApiCall) -> None:
    assert _write(api, "notes", "first") == 201
    assert _write(api, "notes", "second", pinned=True) == 200

    page = Page.objects.get()
    assert (page.body, page.pinned) == ("second", True)
    writes = Activity.objects.filter(kind=Activity.Kind.PAGE_WRITTEN)
    assert [a.summary for a in writes.order_by("created_at")] == [
        "page notes created",
        "page notes updated",
    ]
    assert all("first" not in a.summary and "second" not in a.summary for a in writes)


def test_a_page_body_is_scrubbed_and_capped(api: ApiCall) -> None:
    _write(api, "big", "key ghp_" + "a1B2" * 9 + "\n" + "y" * 17_000)

    body = Page.objects.get().body

    assert "ghp_" not in body
    assert body.endswith("\n[page body truncated; 1015 chars omitted]")


def test_read_and_list(api: ApiCall) -> None:
    _write(api, "b/two", "two")
    _write(api, "a/one", "one", pinned=True)
    _write(api, "b/three", "three")

    page = api("get", "/api/v1/pages/read", {**A, "path": "a/one"})[1]["page"]
    listed = api("get", "/api/v1/pages", A)[1]["pages"]
    only_b = api("get", "/api/v1/pages", {**A, "prefix": "b/"})[1]["pages"]
    missing = api("get", "/api/v1/pages/read", {**A, "path": "nope"})

    assert page["body"] == "one" and page["pinned"] is True
    assert [row["path"] for row in listed] == ["a/one", "b/three", "b/two"]
    assert [row["chars"] for row in listed] == [3, 5, 3]
    assert [row["path"] for row in only_b] == ["b/three", "b/two"]
    assert missing[0] == 404 and missing[1]["code"] == "page_not_found"


def test_a_page_is_never_mail(api: ApiCall) -> None:
    _write(api, "notes")
    api("post", "/api/v1/pages", {**B, "path": "notes", "body": "b's notes"})

    assert api("get", "/api/v1/messages", A)[1]["messages"] == []
    assert api("get", "/api/v1/messages", {**A, "box": "outbox"})[1]["messages"] == []
    assert api("post", "/api/v1/messages/pop", A)[1] == {"message": None}
    assert api("get", "/api/v1/briefing", A)[1]["pending_message_count"] == 0
    assert not Message.objects.exists()
    assert "📬" not in api("post", "/api/v1/sessions", {**A, "session_id": "s"})[1]["context"]


def test_mail_is_never_a_page(api: ApiCall) -> None:
    assert api("post", "/api/v1/messages", SEND)[0] == 201

    assert api("get", "/api/v1/pages", B)[1]["pages"] == []
    assert api("get", "/api/v1/pages", A)[1]["pages"] == []
    assert not Page.objects.exists()


def test_mcp_write_refuses_an_inferred_scope(mcp: RawMcp) -> None:
    text = mcp.tool_error("memory_write_page", {"path": "notes", "body": "x"})

    assert text == (
        "refusing to write a page in default/default: it was resolved by default, not named, "
        "so it may not be the project you are working in. Pass workspace and project."
    )
    assert not Page.objects.exists()


def test_mcp_tools_write_read_and_list(mcp: RawMcp, api: ApiCall) -> None:
    wrote = mcp.call_tool("memory_write_page", {**A, "path": "n", "body": "hi", "pinned": True})
    read = mcp.call_tool("memory_read_page", {**A, "path": "n"})["structuredContent"]
    none = mcp.call_tool("memory_read_page", {**A, "path": "zz"})["structuredContent"]
    listed = mcp.call_tool("memory_list_pages", A)["structuredContent"]

    assert wrote["structuredContent"] == {"path": "n", "created": True}
    assert read["page"]["body"] == "hi" and read["page"]["pinned"] is True
    assert none == {"page": None}
    assert [row["path"] for row in listed["pages"]] == ["n"]


def test_mcp_read_and_list_name_an_inferred_scope(mcp: RawMcp, api: ApiCall) -> None:
    api("post", "/api/v1/sessions", {**A, "session_id": "s-a"})
    _write(api, "notes")

    listed = mcp.call_tool("memory_list_pages", {})["structuredContent"]

    assert listed["resolved_scope"] == A
    assert listed["scope_source"] == "shared_slot"
    assert "hint" in listed
    assert [row["path"] for row in listed["pages"]] == ["notes"]


def test_mcp_pinned_must_be_a_boolean(mcp: RawMcp) -> None:
    text = mcp.tool_error("memory_write_page", {**A, "path": "n", "body": "x", "pinned": "yes"})

    assert "argument 'pinned' must be a boolean" in text


def _prefix_refusal(length: int) -> str:
    return (
        f"page prefix of {length} characters: a page path has at most 200, so no page "
        "could match; pass at most 200 characters"
    )


@pytest.mark.parametrize("length", [201, 60_000])
def test_a_list_prefix_longer_than_any_path_is_an_invalid_page_path(
    api: ApiCall, length: int
) -> None:
    _write(api, "x" * 200)

    status, answer = api("get", "/api/v1/pages", {**A, "prefix": "x" * length})

    assert status == 400
    assert answer == {"detail": _prefix_refusal(length), "code": "invalid_page_path"}


def test_a_list_prefix_as_long_as_a_path_finds_it(api: ApiCall) -> None:
    _write(api, "x" * 200)

    status, answer = api("get", "/api/v1/pages", {**A, "prefix": "x" * 200})

    assert status == 200
    assert [row["path"] for row in answer["pages"]] == ["x" * 200]


@pytest.mark.parametrize("length", [201, 60_000])
def test_mcp_list_refuses_a_prefix_longer_than_any_path(mcp: RawMcp, length: int) -> None:
    text = mcp.tool_error("memory_list_pages", {**A, "prefix": "x" * length})

    assert text == _prefix_refusal(length)


# The create-only path (the decisions register's: docs/reference.md#the-decisions-register)


def _create_once(project: Project, body: str, path: str = "_decisions/q1") -> bool:
    return page_create_once(
        project=project, path=path, body=body, actor="alice (web)", agent="other", user="alice"
    )


def test_create_once_writes_a_new_page_and_records_it(project_a: Project) -> None:
    assert _create_once(project_a, "first") is True

    page = Page.objects.get()
    assert (page.path, page.body, page.updated_by_user) == ("_decisions/q1", "first", "alice")
    written = Activity.objects.get(kind=Activity.Kind.PAGE_WRITTEN)
    assert (written.actor, written.summary) == ("alice (web)", "page _decisions/q1 created")


def test_create_once_never_replaces_a_page(api: ApiCall, project_a: Project) -> None:
    _write(api, "_decisions/q1", "written by hand")

    assert _create_once(project_a, "the register's") is False

    assert Page.objects.get().body == "written by hand"
    assert Activity.objects.filter(kind=Activity.Kind.PAGE_WRITTEN).count() == 1


def test_create_once_keeps_the_path_rule(project_a: Project) -> None:
    with pytest.raises(BadRequest) as refused:
        _create_once(project_a, "body", path="_decisions/../x")

    assert refused.value.code == "invalid_page_path"
    assert not Page.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_racing_create_once_writes_leave_the_first(project_a: Project) -> None:
    barrier = threading.Barrier(4)

    def create(n: int) -> bool:
        try:
            barrier.wait()
            return _create_once(project_a, f"body {n}")
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=4) as pool:
        created = list(pool.map(create, range(4)))

    [winner] = [n for n in range(4) if created[n]]
    assert Page.objects.get().body == f"body {winner}"
    assert Activity.objects.filter(kind=Activity.Kind.PAGE_WRITTEN).count() == 1
