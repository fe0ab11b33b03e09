"""``ai-memory --version``, ``ai-memory brief`` and the top-level command list."""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import subprocess
from collections.abc import Callable

import pytest
from pytest_django.live_server_helper import LiveServer

from aimemory_site.cli.main import build_parser
from tests.cli.conftest import MakeRepo, RunCli
from tests.conftest import make_project

SCOPE_FLAGS = ["--workspace", "default", "--project", "project-a"]


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def cli(make_cli: Callable[[str], RunCli], live_server: LiveServer) -> RunCli:
    return make_cli(live_server.url)


def test_version_prints_the_package_version(offline_cli: RunCli) -> None:
    result = offline_cli("--version")

    assert result.returncode == 0, result.stderr
    assert result.stdout == f"ai-memory {importlib.metadata.version('ai-memory-server')}\n"


def test_the_usage_line_lists_every_command() -> None:
    parser = build_parser()
    [commands] = [
        action for action in parser._actions if isinstance(action, argparse._SubParsersAction)
    ]

    assert commands.metavar == "{" + ",".join(commands.choices) + "}"
    assert {"brief", "completion"} <= set(commands.choices)


@pytest.mark.django_db(transaction=True)
def test_brief_prints_the_projects_brief(cli: RunCli, make_repo: MakeRepo) -> None:
    make_project(None, "default", "project-a")
    ok(cli("page", "write", "overview", "--pinned", "The export service.", *SCOPE_FLAGS))
    ok(cli("page", "write", "_rules/testing", "Run make check.", *SCOPE_FLAGS))

    out = ok(cli("brief", *SCOPE_FLAGS))
    as_json = json.loads(ok(cli("brief", "--json", *SCOPE_FLAGS)))

    assert out.startswith("📘 ai-memory brief for default/project-a:\n")
    assert "## overview\nThe export service." in out
    assert "## _rules/testing\nRun make check." in out
    assert out.endswith("\n") and not out.endswith("\n\n")
    assert out == as_json["brief"].rstrip("\n") + "\n"
    assert as_json["scope"]["workspace"] == "default"


@pytest.mark.django_db(transaction=True)
def test_brief_of_a_project_without_pages_says_there_is_none(
    cli: RunCli, make_repo: MakeRepo
) -> None:
    repo = make_repo("project-a")
    ok(cli("init", cwd=repo))

    out = ok(cli("brief", cwd=repo))

    assert out == (
        "No brief for default/project-a: it has no pages yet. Pinned pages and those under "
        "_rules/ and _slots/ make it (ai-memory page write --pinned PATH BODY).\n"
    )


@pytest.mark.django_db(transaction=True)
def test_brief_of_an_unknown_project_is_exit_1(cli: RunCli) -> None:
    result = cli("brief", *SCOPE_FLAGS)

    assert (result.returncode, result.stdout) == (1, "")
    assert "project default/project-a not found" in result.stderr
