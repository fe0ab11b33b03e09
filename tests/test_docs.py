"""The project's own docs: the reference's tables are the code's, and every link lands."""

from __future__ import annotations

import ast
import dataclasses
import io
import re
import tokenize
from pathlib import Path

import pytest

from aimemory_site.lib.environment import DECLARED_NAMES
from aimemory_site.lib.errors import AppError
from aimemory_site.mcp import server
from aimemory_site.onstart.services import scope_line
from aimemory_site.settings import env_str
from messaging.notices import SECURITY_NOTICE, inbox_notice
from projects.scope import ResolvedScope, ScopeSource, scope_require_named
from tools.docs import REFERENCE, heading_anchors, render

ROOT = Path(__file__).resolve().parent.parent
CODE_DIRECTORIES = ("aimemory_site", "messaging", "projects", "webui", "bench", "tools", "tests")
# A docs path as comments and docstrings cite it: docs/NAME.md, maybe with #ANCHOR.
CITED_DOC = re.compile(r"docs/(?P<file>[a-z0-9_-]+\.md)(?:#(?P<anchor>[a-z0-9_-]+))?")
MARKDOWN_LINK = re.compile(r"\]\((?P<target>[^)\s]+)\)")
ENVIRONMENT_NAME = re.compile(r"[\"'](?P<name>(?:AI_MEMORY|XDG)_[A-Z_]+)[\"']")


def _code_files() -> list[Path]:
    return sorted(
        path
        for directory in CODE_DIRECTORIES
        for path in (ROOT / directory).rglob("*.py")
        if "migrations" not in path.parts
    )


def _comments_and_docstrings(path: Path) -> str:
    """The prose of a module: its comments and docstrings, not its other strings (a help
    example may name a user's file under docs/)."""
    source = path.read_text(encoding="utf-8")
    parts = [
        token.string
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node)
            if docstring:
                parts.append(docstring)
    return "\n".join(parts)


def _reference_is_current() -> bool:
    current = REFERENCE.read_text(encoding="utf-8")
    return render(current) == current


def test_the_reference_tables_are_the_code_s() -> None:
    assert _reference_is_current(), "docs/reference.md is stale: run `make docs`"


def test_renaming_a_tool_makes_the_reference_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    send = server.TOOLS["memory_message_send"]
    renamed = {
        ("memory_message_post" if name == send.name else name): (
            dataclasses.replace(tool, name="memory_message_post") if tool is send else tool
        )
        for name, tool in server.TOOLS.items()
    }
    monkeypatch.setattr(server, "TOOLS", renamed)

    assert not _reference_is_current()


def _one_line(markdown: str) -> str:
    """Markdown prose as one line: quote marks and line breaks gone, spaces collapsed."""
    return " ".join(re.sub(r"^> ?", "", markdown, flags=re.MULTILINE).split())


def _refusal(operation: str) -> str:
    scope = ResolvedScope("{ws}", "{proj}", ScopeSource.SHARED_SLOT)
    with pytest.raises(AppError) as refused:
        scope_require_named(scope, operation)
    return refused.value.message.replace("by shared_slot,", "by {source},")


def test_the_reference_quotes_the_texts_agents_see() -> None:
    reference = _one_line(REFERENCE.read_text(encoding="utf-8"))
    texts = [
        scope_line(workspace="{ws}", project="{proj}"),
        inbox_notice(count=2, workspace="{ws}", project="{proj}").replace("2 ", "{n} ", 1),
        SECURITY_NOTICE,
        *(_refusal(operation) for operation in ("pop", "cancel", "send", "handoff", "write_page")),
    ]

    assert [text for text in texts if _one_line(text) not in reference] == []


def test_reading_an_undeclared_variable_is_refused() -> None:
    with pytest.raises(LookupError, match="AI_MEMORY_NOT_LISTED"):
        env_str("AI_MEMORY_NOT_LISTED")


def test_every_variable_the_code_names_is_declared() -> None:
    named = {
        match["name"]
        for path in _code_files()
        if "tests" not in path.relative_to(ROOT).parts
        for match in ENVIRONMENT_NAME.finditer(path.read_text(encoding="utf-8"))
    }

    assert named, "the scan found no variable at all"
    assert named - DECLARED_NAMES == set()


def test_every_docs_path_cited_in_code_exists() -> None:
    broken = []
    for path in _code_files():
        for match in CITED_DOC.finditer(_comments_and_docstrings(path)):
            target = ROOT / "docs" / match["file"]
            if not target.is_file():
                broken.append(f"{path.relative_to(ROOT)}: {match[0]}")
            elif match["anchor"] and match["anchor"] not in heading_anchors(
                target.read_text(encoding="utf-8")
            ):
                broken.append(f"{path.relative_to(ROOT)}: {match[0]} (no such heading)")

    assert broken == []


@pytest.mark.parametrize(
    "document",
    [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))],
    ids=lambda path: path.name,
)
def test_every_link_between_the_docs_lands(document: Path) -> None:
    broken = []
    for match in MARKDOWN_LINK.finditer(document.read_text(encoding="utf-8")):
        target = match["target"]
        if re.match(r"[a-z]+:", target):
            continue  # a URL: http(s), mailto
        file_part, _, anchor = target.partition("#")
        linked = (document.parent / file_part).resolve() if file_part else document
        if not linked.exists() or (
            anchor
            and linked.suffix == ".md"
            and anchor not in heading_anchors(linked.read_text(encoding="utf-8"))
        ):
            broken.append(target)

    assert broken == []


def test_the_readme_shows_the_quick_start_and_agent_setup_on_its_first_screens() -> None:
    first_lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:80]

    assert "make serve" in "\n".join(first_lines)
    assert "make test" in "\n".join(first_lines)
    assert any(line.startswith("claude mcp add --scope user") for line in first_lines)
