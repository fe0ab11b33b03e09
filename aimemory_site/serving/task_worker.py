"""The background worker that ``ai-memory serve`` runs beside its web processes
(docs/operating.md#background-work).

gunicorn's master starts it once the server is ready, as a process of its own: the
database queue's worker (``ai-memory manage db_worker``), which runs the tasks the web
processes enqueue (``messaging.tasks``). If it stops while the server runs, it is started
again; when the server stops, it is stopped; if the master dies, the kernel stops it
(``PR_SET_PDEATHSIG``). Loads no Django: the master must not (``serving.gunicorn_config``).
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import subprocess
import sys
import threading

#: Seconds between the worker's looks at the queue when it finds nothing: a notification
#: leaves at most this long after its question's commit, plus the sending.
TASK_POLL_SECONDS = 0.5
#: Seconds before a worker that stopped by itself is started again.
RESTART_AFTER_SECONDS = 2.0
#: Seconds a stopping worker has to finish its task before it is killed.
STOP_TIMEOUT_SECONDS = 10.0
_PR_SET_PDEATHSIG = 1


def task_worker_command() -> list[str]:
    """The worker's command line: this Python, ``ai-memory manage db_worker``."""
    return [
        sys.executable,
        "-m",
        "aimemory_site.cli.main",
        "manage",
        "db_worker",
        "--interval",
        str(TASK_POLL_SECONDS),
        "--no-startup-delay",
        "--no-reload",
    ]


def _stop_with_parent() -> None:
    """In the child, before it runs: the kernel sends it SIGTERM when its parent dies."""
    # Not on Linux: the worker is stopped by ``stop`` only.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


class TaskWorkerKeeper:
    """Keeps one worker process running until ``stop``."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None

    def start(self) -> None:
        self._spawn()
        self._watcher = threading.Thread(target=self._watch, name="task-worker-keeper", daemon=True)
        self._watcher.start()

    def _spawn(self) -> None:
        with self._lock:
            if not self._stopping.is_set():
                self._process = subprocess.Popen(
                    task_worker_command(), preexec_fn=_stop_with_parent
                )

    def _watch(self) -> None:
        while not self._stopping.is_set():
            process = self._process
            if process is None:
                return
            code = process.wait()
            if self._stopping.wait(RESTART_AFTER_SECONDS):
                return
            print(
                f"ai-memory: the background worker stopped (exit {code}); starting it again",
                file=sys.stderr,
                flush=True,
            )
            self._spawn()

    def stop(self) -> None:
        """Stop the worker: SIGTERM lets it finish its task; past the timeout it is killed."""
        with self._lock:
            self._stopping.set()
            process = self._process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
