"""``ai-memory page list --prefix P`` with a prefix no page path can start with: the
server's 400 ``invalid_page_path``, said in one line, exit 1."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from pytest_django.live_server_helper import LiveServer

from tests.cli.conftest import MakeRepo, RunCli


@pytest.fixture
def cli(make_cli: Callable[[str], RunCli], live_server: LiveServer) -> RunCli:
    return make_cli(live_server.url)


@pytest.fixture
def project_a(cli: RunCli, make_repo: MakeRepo) -> Path:
    """The repository ``project-a``, registered on the server by its session-start hook."""
    repo = make_repo("project-a")
    hook = json.dumps({"session_id": "a-0", "cwd": str(repo)})
    assert cli("hook", "session-start", cwd=repo, stdin=hook).returncode == 0
    return repo


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("length", [201, 60_000])
def test_a_prefix_longer_than_any_page_path_is_exit_1_in_one_line(
    cli: RunCli, project_a: Path, length: int
) -> None:
    result = cli("page", "list", "--prefix", "x" * length, cwd=project_a)

    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == (
        "ai-memory: GET /api/v1/pages: server returned 400: page prefix "
        f"of {length} characters: a page path has at most 200, so no page could match; "
        "pass at most 200 characters\n"
    )


@pytest.mark.django_db(transaction=True)
def test_a_prefix_as_long_as_a_page_path_lists_it(cli: RunCli, project_a: Path) -> None:
    path = "x" * 200
    assert cli("page", "write", path, "long path", cwd=project_a).returncode == 0

    result = cli("page", "list", "--prefix", path, "--json", cwd=project_a)

    assert result.returncode == 0, result.stderr
    assert [page["path"] for page in json.loads(result.stdout)["pages"]] == [path]
