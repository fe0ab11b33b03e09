"""Codex's wake: ``hook wait --client codex``, its detached waiter, and ``hook session-end``.

Codex runs a ``Stop`` hook in the foreground, so a hook that waited would hold the
person's prompt. ``hook wait --client codex`` therefore starts a waiter in a session of
its own and returns at once. The waiter repeats session waits (``hook.wait_for_mail``) and,
on new mail, runs ``codex queue --thread <session_id> --message <the inbox notice>``,
which starts a turn in the idle Codex session; then it waits again. The notice counts and
names mail, never its text. See docs/agents.md#codex.

One waiter per session: the hook records the waiter's pid in a file named by a hash of the
server URL and the session id, ends the older waiter it names (after checking, from the
process's command line, that it is that session's waiter) and the server ends an older
parked wait of the session besides. ``hook session-end`` ends the waiter the same way.
The waiter also ends within seconds of the Codex process that ran the hook.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import TextIO

from aimemory_site.cli import hook, waiters
from aimemory_site.cli.client import ApiClient, server_url_from
from aimemory_site.cli.common import timeout_arg
from aimemory_site.cli.errors import CliError
from aimemory_site.cli.processes import hook_runner, is_alive

CODEX_BIN_ENV = "AI_MEMORY_CODEX_BIN"
# Under the state home (hook.state_home): the waiters' log.
WAITER_LOG = Path("ai-memory") / "codex-waiter.log"
# Past this size the log is moved to codex-waiter.log.1 (replacing it) and begun anew.
LOG_MAX_BYTES = 1024 * 1024
# The waiter runs as ``python -m`` this module: its command line names it, which is how
# a pid file's process is known to be a waiter and not a process that reused the pid.
WAITER_MODULE = "aimemory_site.cli.codex_wake"
QUEUE_TIMEOUT_SECONDS = 10.0
# ``codex queue`` runs at most once in this long, a retry included.
QUEUE_INTERVAL_SECONDS = 1.0
# How often the waiter checks that the Codex process that ran the hook is still there.
PARENT_CHECK_SECONDS = 1.0
CLIENT_HELP = "--client codex"


class _Ended(BaseException):
    """Raised in the waiter's main thread by SIGTERM: a newer waiter, session-end, or the
    Codex process gone. A BaseException, so no ``except Exception`` swallows it."""


# ---- state files ----------------------------------------------------------------------------


def log_path(environ: Mapping[str, str]) -> Path:
    return hook.state_home(environ) / WAITER_LOG


def _rotate_if_large(path: Path) -> None:
    with contextlib.suppress(OSError):
        if path.stat().st_size > LOG_MAX_BYTES:
            path.replace(path.with_name(path.name + ".1"))


def log(environ: Mapping[str, str], line: str) -> None:
    """Append one line to the waiters' log (kept under LOG_MAX_BYTES); best effort."""
    try:
        path = log_path(environ)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _rotate_if_large(path)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        with path.open("a", encoding="utf-8") as stream:
            stream.write(f"{stamp} [{os.getpid()}] {line}\n")
    except (OSError, RuntimeError):
        pass


# ---- hook wait --client codex ---------------------------------------------------------------


def run_hook(timeout: float, stdin: TextIO | None = None) -> int:
    """Codex's Stop hook: start the session's waiter (ending an older one) and return."""
    session = hook.read_session(sys.stdin if stdin is None else stdin, f"hook wait {CLIENT_HELP}")
    if isinstance(session, str):
        print(session, file=sys.stderr)
        return 0
    session_id, cwd = session["session_id"], session["cwd"]
    environ = os.environ
    key = hook.session_key(server_url_from(environ), session_id)
    runner, runner_start = hook_runner(os.getppid())
    pid_file = waiters.replace_waiter(environ, session_id)
    arguments = [
        sys.executable,
        "-m",
        WAITER_MODULE,
        "--key",
        key,
        # Joined with "=", so an id or a path that begins with "-" is not read as an option.
        f"--session-id={session_id}",
        f"--cwd={cwd}",
        "--timeout",
        repr(timeout),
        "--watch-pid",
        str(runner),
        "--watch-start",
        runner_start,
    ]
    try:
        waiter = _spawn_detached(arguments, cwd, environ)
    except OSError as failed:
        print(
            f"ai-memory: hook wait {CLIENT_HELP}: could not start the waiter: {failed}",
            file=sys.stderr,
        )
        return 0
    if pid_file is not None:
        with contextlib.suppress(OSError):
            waiters.write_pid(pid_file, waiter)
    return 0


def _spawn_detached(arguments: Sequence[str], cwd: str, environ: Mapping[str, str]) -> int:
    """Start the waiter in a session of its own (so the hook's end, or a signal to Codex's
    process group, does not reach it), stdout to nowhere and stderr to the log."""
    log_file: int | None = None
    try:
        path = log_path(environ)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        _rotate_if_large(path)
        log_file = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except (OSError, RuntimeError):
        log_file = None
    try:
        process = subprocess.Popen(
            arguments,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL if log_file is None else log_file,
            cwd=cwd if Path(cwd).is_dir() else None,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        if log_file is not None:
            os.close(log_file)
    return process.pid


# ---- the waiter -----------------------------------------------------------------------------


def codex_command(environ: Mapping[str, str]) -> str | None:
    """``AI_MEMORY_CODEX_BIN`` (a path or a command name), else ``codex`` on PATH."""
    configured = environ.get(CODEX_BIN_ENV, "").strip()
    if configured and os.sep in configured:
        return configured
    return shutil.which(configured or "codex", path=environ.get("PATH"))


class Queuer:
    """Runs ``codex queue`` for a session: at most once a QUEUE_INTERVAL_SECONDS, a
    failure retried once, failures and successes written to the log."""

    def __init__(self, session_id: str, environ: Mapping[str, str]) -> None:
        self.session_id = session_id
        self.environ = environ
        self.last_run = -QUEUE_INTERVAL_SECONDS

    def queue(self, notice: str) -> bool:
        for attempt in (1, 2):
            problem = self._run_once(notice)
            if problem is None:
                log(self.environ, f"session {self.session_id}: queued the inbox notice")
                return True
            retry = "; retrying" if attempt == 1 else "; giving up on this notice"
            log(self.environ, f"session {self.session_id}: codex queue failed: {problem}{retry}")
        return False

    def _run_once(self, notice: str) -> str | None:
        """Run ``codex queue`` once; None on success, else what went wrong."""
        pause = self.last_run + QUEUE_INTERVAL_SECONDS - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        self.last_run = time.monotonic()
        codex = codex_command(self.environ)
        if codex is None:
            named = self.environ.get(CODEX_BIN_ENV, "").strip() or "codex"
            return f"{named!r} not found on PATH (set {CODEX_BIN_ENV} to the codex executable)"
        command = [codex, "queue", "--thread", self.session_id, "--message", notice]
        try:
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=QUEUE_TIMEOUT_SECONDS,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return f"{codex} did not finish within {QUEUE_TIMEOUT_SECONDS:g} s"
        except OSError as failed:
            return f"could not run {codex}: {failed}"
        if done.returncode != 0:
            said = " | ".join(line.strip() for line in done.stderr.splitlines() if line.strip())
            return f"{codex} exited {done.returncode}: {said[:500]}"
        return None


def _watch(pid: int, start: str) -> None:
    """Send this process SIGTERM once ``pid`` (the Codex that ran the hook) is gone."""
    while is_alive(pid, start):
        time.sleep(PARENT_CHECK_SECONDS)
    os.kill(os.getpid(), signal.SIGTERM)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # A second SIGTERM (session-end and the watcher both) must not interrupt the cleanup.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise _Ended


def run_waiter(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> int:
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        pid_file: Path | None = waiters.pid_path(environ, args.key)
    except RuntimeError:
        pid_file = None
    try:
        if args.watch_pid:
            threading.Thread(
                target=_watch, args=(args.watch_pid, args.watch_start), daemon=True
            ).start()
        _wait_and_queue(args, environ)
    except _Ended:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if pid_file is not None:
            waiters.forget(pid_file)
    return 0


def _wait_and_queue(args: argparse.Namespace, environ: Mapping[str, str]) -> None:
    hook_input = {"session_id": args.session_id, "cwd": args.cwd}
    try:
        payload = hook.session_wait_payload(hook_input, environ)
    except CliError as failed:
        log(environ, f"session {args.session_id}: no project for {args.cwd}: {failed}")
        return
    # Each request waits for its answer 5 s longer than it asks the server to wait.
    client = ApiClient.from_environment(environ, timeout_seconds=hook.HOOK_TIMEOUT_SECONDS)
    queuer = Queuer(args.session_id, environ)
    deadline = time.monotonic() + args.timeout
    while (remaining := deadline - time.monotonic()) > 0:
        notice = hook.wait_for_mail(client, payload, remaining, agent="codex")
        if notice is None:
            return  # the timeout, a newer wait of the session, or an error answer
        queuer.queue(notice)


# ---- arguments ----------------------------------------------------------------------------

CLIENTS = ("claude", "codex")
_WHERE = f"${hook.STATE_HOME_ENV} (else ~/.local/state)"  # as hook.state_home reads it
WAIT_HELP = (
    f"With {CLIENT_HELP}, for Codex's Stop hook, which Codex waits for: it starts a waiter "
    "for the session in the background and returns at once (exit 0, nothing printed). The "
    "waiter repeats the same session waits until --timeout; on new mail it runs "
    "'codex queue --thread <session_id> --message <the inbox notice>' (the codex on PATH, "
    f"or {CODEX_BIN_ENV}), which starts a turn in the idle session, then waits again. It "
    "runs codex queue at most once a second and never passes message text. A newer waiter "
    "of the same session ends the older one; so do 'hook session-end' and the end of the "
    "Codex process that ran the hook (within 5 s). A failed codex queue (missing, non-zero "
    f"exit, over {QUEUE_TIMEOUT_SECONDS:g} s) is tried once more, and written to the "
    f"waiter's log, {WAITER_LOG.as_posix()} under {_WHERE}, moved to .1 past 1 MiB; the "
    f"pid files are in {waiters.WAITER_PIDS.as_posix()}/ there. Hook JSON that is empty, not JSON "
    "or without session_id or cwd is one line on stderr, and exit 0."
)
WAIT_EXAMPLE = (
    "in ~/.codex/hooks.json: "
    '{"hooks": {"Stop": [{"hooks": [{"type": "command", '
    f'"command": "ai-memory hook wait {CLIENT_HELP}"}}]}}]}}}}'
)


def add_client_flag(wait: argparse.ArgumentParser) -> None:
    wait.add_argument(
        "--client",
        choices=CLIENTS,
        default="claude",
        help="the harness whose Stop hook this is (default claude); codex starts a "
        f"detached waiter that wakes the session with codex queue ({CODEX_BIN_ENV}: the "
        "codex executable)",
    )


def waiter_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=f"python -m {WAITER_MODULE}",
        description="The detached waiter that 'ai-memory hook wait --client codex' starts.",
    )
    parser.add_argument("--key", required=True, help="the session's pid-file key")
    parser.add_argument("--session-id", required=True)
    parser.add_argument("--cwd", required=True)
    parser.add_argument("--timeout", type=timeout_arg, required=True)
    parser.add_argument("--watch-pid", type=int, default=0)
    parser.add_argument("--watch-start", default="")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    return run_waiter(waiter_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
