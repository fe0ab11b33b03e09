"""One waiter per session: the pid files of the processes that wait for a session's mail,
and ``hook session-end``, which ends a session's waiter at once (docs/agents.md).

A waiter (Claude Code's ``hook wait``, or the detached waiter of ``hook wait --client
codex``) records its pid and start time in a file named by a hash of the server URL and
the session id. A newer waiter of the session and ``hook session-end`` end the one the
file names, after checking that the pid still belongs to the process that started then,
so a pid the system has since reused is never signalled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from aimemory_site.cli import hook
from aimemory_site.cli.client import server_url_from
from aimemory_site.cli.help_text import SubParsers, add_command
from aimemory_site.cli.processes import is_alive, process_info

# Under the state home (``hook.state_home``): one pid file per session with a waiter.
WAITER_PIDS = Path("ai-memory") / "waiters"
# A pid file older than this is a leftover of a waiter that was killed (a waiter removes
# its own file when it ends).
PID_FILE_KEEP_SECONDS = 7 * 24 * 60 * 60


def pid_path(environ: Mapping[str, str], key: str) -> Path:
    """The pid file of the session whose key is ``key`` (``hook.session_key``). Raises
    RuntimeError when there is no home directory."""
    return hook.state_home(environ) / WAITER_PIDS / f"{key}.pid"


def read_waiter(path: Path) -> tuple[int, str] | None:
    """The pid and start time the file names, or None."""
    try:
        pid, _, start = path.read_text(encoding="ascii").strip().partition(" ")
    except (OSError, UnicodeDecodeError):
        return None
    return (int(pid), start) if pid.isdigit() else None


def read_pid(path: Path) -> int | None:
    recorded = read_waiter(path)
    return None if recorded is None else recorded[0]


def write_pid(path: Path, pid: int) -> None:
    """Record ``pid`` and its start time, replacing the file in one step, so a reader
    never sees half of it."""
    info = process_info(pid)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(f"{pid} {info.start if info else ''}\n", encoding="ascii")
    partial.replace(path)


def end_waiter(path: Path) -> bool:
    """SIGTERM the waiter the pid file names, if that process still runs; True if one did."""
    recorded = read_waiter(path)
    if recorded is None:
        return False
    pid, start = recorded
    if pid == os.getpid() or not start or not is_alive(pid, start):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return False
    return True


def forget(path: Path) -> None:
    """Remove the pid file if it still names this process (a newer waiter's stays)."""
    if read_pid(path) == os.getpid():
        with contextlib.suppress(OSError):
            path.unlink()


def replace_waiter(environ: Mapping[str, str], session_id: str) -> Path | None:
    """End the session's waiter, if one runs, and prune old pid files; the session's pid
    file, or None when there is no state directory."""
    try:
        path = pid_path(environ, hook.session_key(server_url_from(environ), session_id))
    except RuntimeError:
        return None
    end_waiter(path)
    hook.prune_announced(path.parent, time.time(), PID_FILE_KEEP_SECONDS)
    return path


def become_waiter(environ: Mapping[str, str], session_id: str) -> None:
    """Make this process the session's waiter: the older one ends, this one is recorded,
    and a SIGTERM (a newer waiter, ``hook session-end``) ends it at once, with status 0
    and nothing printed."""
    path = replace_waiter(environ, session_id)
    if path is None:
        return
    with contextlib.suppress(OSError):
        write_pid(path, os.getpid())

    def ended(signum: int, frame: object) -> None:
        forget(path)
        sys.stdout.flush()
        os._exit(0)

    signal.signal(signal.SIGTERM, ended)


def run_session_end(stdin: TextIO | None = None) -> int:
    """Codex's and Claude Code's SessionEnd hook: end the session's waiter; say nothing."""
    session = hook.read_session(
        sys.stdin if stdin is None else stdin, "hook session-end", required=("session_id",)
    )
    if isinstance(session, str):
        print(session, file=sys.stderr)
        return 0
    session_id = session["session_id"]
    with contextlib.suppress(RuntimeError):
        end_waiter(pid_path(os.environ, hook.session_key(server_url_from(os.environ), session_id)))
    return 0


def add_session_end_parser(hooks: SubParsers) -> None:
    session_end = add_command(
        hooks,
        "session-end",
        summary="end the session's waiter",
        paragraphs=[
            "For the SessionEnd hook of Claude Code and Codex. Reads the hook JSON on stdin "
            "(session_id) and ends, at once, the session's waiter: the 'hook wait' Claude "
            "Code runs, or the one 'hook wait --client codex' started, after checking that "
            "the process it recorded still runs. It makes no request and always exits 0, "
            "printing nothing but one stderr line for hook JSON it cannot use.",
            f"The waiters' pid files are in {WAITER_PIDS.as_posix()}/ under "
            f"${hook.STATE_HOME_ENV} (else ~/.local/state).",
        ],
        examples=[
            'echo \'{"session_id": "s1", "cwd": "/src/project-a"}\' | ai-memory hook session-end',
            "in .claude/settings.json or .codex/hooks.json: "
            '{"hooks": {"SessionEnd": [{"hooks": [{"type": "command", '
            '"command": "ai-memory hook session-end"}]}]}}',
        ],
    )
    session_end.set_defaults(handler=lambda args: run_session_end(), command_parser=session_end)
