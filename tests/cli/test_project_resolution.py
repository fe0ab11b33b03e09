"""Which project the CLI acts for: flags, then a marker, then git, then the directory."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from aimemory_site.cli.scope import (
    Scope,
    ScopeError,
    project_name_from,
    resolve_scope,
)

RunCli = Callable[..., subprocess.CompletedProcess[str]]
MakeRepo = Callable[[str], Path]


def write_marker(directory: Path, text: str) -> Path:
    path = directory / ".ai-memory.toml"
    path.write_text(text)
    return path


def test_plain_directory_names_the_project(tmp_path: Path) -> None:
    directory = tmp_path / "scratch-notes"
    directory.mkdir()

    assert resolve_scope(directory, {}) == Scope("default", "scratch-notes")


def test_git_repository_root_names_the_project_from_a_subdirectory(make_repo: MakeRepo) -> None:
    repo = make_repo("project-a")
    subdirectory = repo / "src" / "deep"
    subdirectory.mkdir(parents=True)

    assert resolve_scope(subdirectory, {}) == Scope("default", "project-a")


def test_linked_worktree_maps_to_its_main_repository(
    make_repo: MakeRepo, git: Callable[..., str], tmp_path: Path
) -> None:
    repo = make_repo("project-a")
    git(repo, "commit", "-q", "--allow-empty", "-m", "start")
    worktree = tmp_path / "feature-checkout"
    git(repo, "worktree", "add", "-q", str(worktree))

    assert resolve_scope(worktree, {}) == Scope("default", "project-a")


def test_linked_worktree_uses_its_main_repositorys_marker(
    make_repo: MakeRepo, git: Callable[..., str], tmp_path: Path
) -> None:
    repo = make_repo("project-a")
    git(repo, "commit", "-q", "--allow-empty", "-m", "start")
    worktree = tmp_path / "feature-checkout"
    git(repo, "worktree", "add", "-q", str(worktree))
    marker = write_marker(repo, 'workspace = "acme"\n')

    scope = resolve_scope(worktree, {})

    assert (scope.workspace, scope.project) == ("acme", "project-a")
    assert scope.marker is not None and scope.marker.path == marker


def test_marker_names_workspace_and_project_from_a_subdirectory(make_repo: MakeRepo) -> None:
    repo = make_repo("project-a")
    marker = write_marker(repo, 'workspace = "acme"\nproject = "billing"\n')
    subdirectory = repo / "docs"
    subdirectory.mkdir()

    scope = resolve_scope(subdirectory, {})

    assert (scope.workspace, scope.project) == ("acme", "billing")
    assert scope.marker_note() == (
        f"ai-memory: scope acme/billing (workspace + project from {marker})"
    )


def test_marker_without_project_names_the_repository_it_sits_in(make_repo: MakeRepo) -> None:
    repo = make_repo("project-a")
    marker = write_marker(repo, 'workspace = "acme"\n')
    (repo / "lib").mkdir()

    scope = resolve_scope(repo / "lib", {})

    assert (scope.workspace, scope.project) == ("acme", "project-a")
    assert (
        scope.marker_note()
        == f"ai-memory: scope acme/project-a (workspace + project from {marker})"
    )


def test_flags_win_over_the_marker_and_say_nothing(make_repo: MakeRepo) -> None:
    repo = make_repo("project-a")
    write_marker(repo, 'workspace = "acme"\nproject = "billing"\n')

    scope = resolve_scope(repo, {}, workspace="other", project="named")

    assert (scope.workspace, scope.project) == ("other", "named")
    assert scope.marker_note() is None


def test_one_flag_fixes_its_half_and_the_marker_decides_the_other(make_repo: MakeRepo) -> None:
    repo = make_repo("project-a")
    marker = write_marker(repo, 'workspace = "acme"\nproject = "billing"\n')

    scope = resolve_scope(repo, {}, project="named")

    assert (scope.workspace, scope.project) == ("acme", "named")
    assert scope.marker_note() == f"ai-memory: scope acme/named (workspace from {marker})"


def test_ignore_marker_variable_skips_the_marker(make_repo: MakeRepo) -> None:
    repo = make_repo("project-a")
    write_marker(repo, 'workspace = "acme"\nproject = "billing"\n')

    scope = resolve_scope(repo, {"AI_MEMORY_IGNORE_MARKER": "1"})

    assert scope == Scope("default", "project-a")


def test_host_cwd_basename_names_the_project_inside_a_container(make_repo: MakeRepo) -> None:
    repo = make_repo("workspace")

    scope = resolve_scope(repo, {"AI_MEMORY_HOST_CWD": "/home/dev/src/project-a"})

    assert scope == Scope("default", "project-a")


def test_marker_briefing_opt_in_is_read(tmp_path: Path) -> None:
    write_marker(tmp_path, 'project = "p"\n[briefing]\ninject_on_session_start = true\n')

    scope = resolve_scope(tmp_path, {})

    assert scope.marker is not None and scope.marker.inject_brief


@pytest.mark.parametrize(
    "marker_text",
    ["workspace = \n", 'workspace = ""\n', "project = 3\n"],
    ids=["not-toml", "empty-name", "not-a-string"],
)
def test_unusable_marker_is_an_error_naming_the_file(tmp_path: Path, marker_text: str) -> None:
    marker = write_marker(tmp_path, marker_text)

    with pytest.raises(ScopeError, match=re.escape(f"invalid {marker}: ")):
        resolve_scope(tmp_path, {})


@pytest.mark.parametrize(
    ("directory_name", "project"),
    [
        ("My App", "My-App"),
        (".dotfiles", "dotfiles"),
        ("ok_name-1.2", "ok_name-1.2"),
        ("", "default"),
    ],
)
def test_derived_names_are_valid_project_names(directory_name: str, project: str) -> None:
    assert project_name_from(directory_name) == project


def test_cli_says_on_stderr_in_one_line_when_a_marker_decides(
    make_repo: MakeRepo, offline_cli: RunCli
) -> None:
    repo = make_repo("project-a")
    marker = write_marker(repo, 'workspace = "acme"\nproject = "billing"\n')

    result = offline_cli("message", "list", cwd=repo)

    note, failure = result.stderr.splitlines()
    assert note == f"ai-memory: scope acme/billing (workspace + project from {marker})"
    assert failure.startswith("ai-memory: cannot reach ai-memory server at ")
    assert result.returncode == 1


def test_cli_reports_an_unusable_marker_in_one_line(tmp_path: Path, offline_cli: RunCli) -> None:
    marker = write_marker(tmp_path, "workspace = [\n")

    result = offline_cli("message", "pop", cwd=tmp_path)

    assert result.returncode == 1
    assert len(result.stderr.splitlines()) == 1
    assert result.stderr.startswith(f"ai-memory: invalid {marker}: ")
