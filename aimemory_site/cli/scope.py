"""Which project the CLI acts for: flags, else the nearest marker, else the repository.

The order, as ``ai-memory handoffs`` resolves it upstream:

1. ``--workspace`` / ``--project`` (each flag fixes its half);
2. the nearest ``.ai-memory.toml`` walking up from the working directory, else the one
   at the git main worktree root (keys ``workspace`` and ``project``; a marker without
   ``project`` names the repository or directory it sits in), unless
   ``AI_MEMORY_IGNORE_MARKER=1``;
3. workspace ``default`` and the basename of ``AI_MEMORY_HOST_CWD`` (containerized use),
   else of the git main worktree root (a linked worktree maps to its main repository),
   else of the working directory.
"""

from __future__ import annotations

import subprocess
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from aimemory_site.cli.errors import CliError
from aimemory_site.lib.names import name_from_directory

MARKER_FILE_NAME = ".ai-memory.toml"
IGNORE_MARKER_ENV = "AI_MEMORY_IGNORE_MARKER"
HOST_CWD_ENV = "AI_MEMORY_HOST_CWD"
DEFAULT_WORKSPACE = "default"
# The name of last resort, for a directory whose name has no usable character ("/").
FALLBACK_PROJECT = "default"
GIT_TIMEOUT_SECONDS = 5.0
_TRUE_WORDS = frozenset({"1", "true", "yes", "on"})


class ScopeError(CliError):
    """A marker file that cannot be used."""


@dataclass(frozen=True)
class Marker:
    """A parsed ``.ai-memory.toml``."""

    path: Path
    workspace: str | None
    project: str | None
    inject_brief: bool


@dataclass(frozen=True)
class Scope:
    workspace: str
    project: str
    marker: Marker | None = None
    # Which halves ("workspace", "project") the marker decided; empty when it decided none.
    decided_by_marker: tuple[str, ...] = ()
    # No flag named either half: this is the project of the working directory, the one
    # ``ai-memory init`` run there registers.
    of_working_directory: bool = True

    @property
    def label(self) -> str:
        return f"{self.workspace}/{self.project}"

    def marker_note(self) -> str | None:
        """The stderr line that says a marker chose the scope, or None if none did."""
        if self.marker is None or not self.decided_by_marker:
            return None
        parts = " + ".join(self.decided_by_marker)
        return f"ai-memory: scope {self.label} ({parts} from {self.marker.path})"


def _marker_string(document: Mapping[str, object], key: str, path: Path) -> str | None:
    value = document.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ScopeError(f"invalid {path}: {key!r} must be a non-empty string")
    return value.strip()


def read_marker(path: Path) -> Marker:
    try:
        with path.open("rb") as marker_file:
            document = tomllib.load(marker_file)
    except OSError as exc:
        raise ScopeError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ScopeError(f"invalid {path}: {exc}") from exc
    briefing = document.get("briefing")
    inject_brief = isinstance(briefing, dict) and briefing.get("inject_on_session_start") is True
    return Marker(
        path=path,
        workspace=_marker_string(document, "workspace", path),
        project=_marker_string(document, "project", path),
        inject_brief=inject_brief,
    )


def marker_ignored(environ: Mapping[str, str]) -> bool:
    return environ.get(IGNORE_MARKER_ENV, "").strip().lower() in _TRUE_WORDS


def find_marker(start: Path, environ: Mapping[str, str]) -> Marker | None:
    """The nearest marker at or above ``start``, unless markers are switched off.

    A linked worktree (often a sibling directory) has none above it unless the marker is
    committed; it then uses its main worktree's, where ``ai-memory init`` writes it.
    """
    if marker_ignored(environ):
        return None
    for directory in (start, *start.parents):
        candidate = directory / MARKER_FILE_NAME
        if candidate.is_file():
            return read_marker(candidate)
    main_root = git_main_worktree_root(start)
    if main_root is not None and (main_root / MARKER_FILE_NAME).is_file():
        return read_marker(main_root / MARKER_FILE_NAME)
    return None


def git_main_worktree_root(directory: Path) -> Path | None:
    """The main worktree of the repository holding ``directory``, or None outside git.

    ``git worktree list`` names the main worktree first, also when asked from a linked
    worktree, which is what maps a worktree to its repository's name.
    """
    try:
        result = subprocess.run(
            ["git", "-C", str(directory), "worktree", "list", "--porcelain"],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if result.returncode != 0:
        return None
    for line in result.stdout.splitlines():
        if line.startswith("worktree "):
            return Path(line.removeprefix("worktree "))
    return None


def project_name_from(directory_name: str) -> str:
    """A valid project name from a directory name (``My App`` -> ``My-App``).

    Derived names only: a name the server refuses would make the session-start hook fail
    silently for that directory forever.
    """
    return name_from_directory(directory_name) or FALLBACK_PROJECT


def repository_project_name(directory: Path) -> str:
    """The basename of the git main worktree root holding ``directory``, else its own."""
    root = git_main_worktree_root(directory) or directory
    return project_name_from(root.name)


def default_project_name(cwd: Path, environ: Mapping[str, str]) -> str:
    host_cwd = environ.get(HOST_CWD_ENV, "").strip()
    if host_cwd:
        return project_name_from(Path(host_cwd).name)
    return repository_project_name(cwd)


def resolve_scope(
    cwd: Path,
    environ: Mapping[str, str],
    *,
    workspace: str | None = None,
    project: str | None = None,
) -> Scope:
    """Resolve the current (workspace, project); raises ScopeError for a broken marker."""
    workspace = (workspace or "").strip() or None
    project = (project or "").strip() or None
    if workspace and project:
        return Scope(workspace, project, of_working_directory=False)
    of_working_directory = workspace is None and project is None
    marker = find_marker(cwd, environ)
    if marker is None:
        return Scope(
            workspace or DEFAULT_WORKSPACE,
            project or default_project_name(cwd, environ),
            of_working_directory=of_working_directory,
        )
    decided: list[str] = []
    if workspace is None and marker.workspace is not None:
        decided.append("workspace")
    if project is None:
        decided.append("project")
    return Scope(
        workspace=workspace or marker.workspace or DEFAULT_WORKSPACE,
        project=project or marker.project or repository_project_name(marker.path.parent),
        marker=marker,
        decided_by_marker=tuple(decided),
        of_working_directory=of_working_directory,
    )
