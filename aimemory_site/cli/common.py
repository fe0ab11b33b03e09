"""What every client command shares: its scope, its flags, the checks of a server
answer, and printing it safely. Django-free, like every client command."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from aimemory_site.cli.client import ApiClient, ClientError, ProjectAdvice
from aimemory_site.cli.scope import Scope, resolve_scope

# Control characters other than newline and tab: in a body from another project they
# could drive the reader's terminal (erase lines, retitle, hide text).
_TERMINAL_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def terminal_safe(text: str) -> str:
    """``text`` with terminal control characters shown as U+FFFD; newlines and tabs kept."""
    return _TERMINAL_CONTROLS.sub("\ufffd", text)


def timeout_arg(text: str) -> float:
    """A ``--timeout S``: a finite number of seconds, at least 0."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number of seconds: {text!r}") from None
    if not seconds >= 0 or seconds == float("inf"):  # also refuses NaN
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return seconds


def malformed(request: str, key: str) -> ClientError:
    return ClientError(f"{request}: server answer has no valid {key!r}")


def answer_str(answer: Mapping[str, Any], key: str, request: str) -> str:
    value = answer.get(key)
    if not isinstance(value, str):
        raise malformed(request, key)
    return value


def answer_count(answer: Mapping[str, Any], key: str, request: str) -> int:
    value = answer.get(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise malformed(request, key)
    return value


def print_json(answer: Mapping[str, Any]) -> None:
    print(json.dumps(answer, indent=2, ensure_ascii=False))


def current_scope(workspace: str | None, project: str | None) -> Scope:
    scope = resolve_scope(Path.cwd(), os.environ, workspace=workspace, project=project)
    note = scope.marker_note()
    if note:
        print(note, file=sys.stderr)
    return scope


def api_client(scope: Scope) -> ApiClient:
    """The API client of a command that acts as ``scope``. When that is the working
    directory's own project, a 404 for it says that ``ai-memory init`` here registers it:
    a fresh repository's project does not exist until something starts a session there."""
    advice = None
    if scope.of_working_directory:
        advice = ProjectAdvice(scope.label, f"Run `ai-memory init` here to register {scope.label}.")
    return ApiClient.from_environment(project_advice=advice)


def add_scope_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", metavar="W", help="the current project's workspace")
    parser.add_argument("--project", metavar="P", help="the current project")


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the server's JSON answer")
