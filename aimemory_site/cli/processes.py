"""The processes of a waiter's world, read from ``/proc`` (``ps`` where there is none):
which process ran a hook, and whether it still runs (docs/agents.md: no waiter outlives
the client that ran its hook by more than 5 s).

A harness may run a hook command through a shell (``sh -c``), which exits with the hook
or has already been replaced by it; the process to watch is the first ancestor that is
not a shell. A pid is known by its start time too, which a reused pid does not share.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
# Parents that are a shell between the harness and the hook, not the harness itself.
SHELL_NAMES = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "busybox"})


@dataclass(frozen=True)
class ProcessInfo:
    parent: int
    name: str
    # The start time in clock ticks since boot (Linux), which a reused pid does not share;
    # "" where it cannot be read.
    start: str
    zombie: bool


def process_info(pid: int) -> ProcessInfo | None:
    """What ``/proc`` (or ``ps`` where there is none) says of ``pid``; None when gone."""
    if PROC.joinpath("self", "stat").exists():
        try:
            stat = PROC.joinpath(str(pid), "stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        # "pid (name) state ppid ... starttime": the name may hold spaces and parentheses.
        name = stat[stat.find("(") + 1 : stat.rfind(")")]
        fields = stat[stat.rfind(")") + 2 :].split()
        try:
            return ProcessInfo(int(fields[1]), name, fields[19], fields[0] in ("Z", "X"))
        except (IndexError, ValueError):
            return None
    try:
        answer = subprocess.run(
            ["ps", "-o", "ppid=", "-o", "comm=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    parent, _, command = answer.stdout.strip().partition(" ")
    if answer.returncode != 0 or not parent.isdigit():
        return None
    return ProcessInfo(int(parent), Path(command.strip()).name, "", False)


def hook_runner(start_pid: int) -> tuple[int, str]:
    """The process that ran the hook: ``start_pid`` (the hook's parent), or, when that is
    a shell, the first ancestor that is not one. Returns (pid, start).

    Codex runs a hook command with ``$SHELL -c``; the shell exits with the hook (or has
    already been replaced by it, for a simple command), so it is not the one to watch.
    """
    pid = start_pid
    for _ in range(8):
        info = process_info(pid)
        if info is None:
            break
        if info.name not in SHELL_NAMES or info.parent <= 1:
            return pid, info.start
        pid = info.parent
    return start_pid, ""


def is_alive(pid: int, start: str) -> bool:
    """Whether ``pid`` still runs and is the process that had it at ``start``."""
    info = process_info(pid)
    if info is None:
        if PROC.joinpath("self").exists():
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return not info.zombie and (not start or not info.start or info.start == start)


def command_line(pid: int) -> list[str]:
    """The process's arguments; [] when it is gone or cannot be read."""
    try:
        raw = PROC.joinpath(str(pid), "cmdline").read_bytes()
    except OSError:
        raw = b""
    if raw:
        return raw.decode(errors="replace").rstrip("\0").split("\0")
    if PROC.joinpath("self").exists():
        return []
    try:
        answer = subprocess.run(
            ["ps", "-ww", "-o", "command=", "-p", str(pid)],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return answer.stdout.split()
