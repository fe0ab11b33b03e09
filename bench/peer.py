"""Run the peer project ``agent-inbox`` (PyPI) beside our server, for the benchmark.

agent-inbox is "a SQLite mailbox for local LLM agents": one HTTP API, ActivityStreams
messages. It needs Python 3.12+, so it lives in its own Python 3.13 venv under a scratch
directory and is **never** installed into this project's environment.

How the peer runs (what :func:`peer_start` starts, with the package's defaults):

- ``<venv>/bin/agent-inbox serve``, the hub's shipped server mode (the same entry point as
  its Docker image): ``uvicorn.run(app)`` in one process, one asyncio event loop, no
  worker processes and no thread pool for requests. The bare install has no uvloop or
  httptools, so uvicorn uses the asyncio loop and the h11 parser. Litestar app.
- Configuration is environment only (``AGENT_INBOX_*``); we set just HOST=127.0.0.1,
  PORT, DB=``<data_dir>/agent-mailbox.db`` and PUBLIC_URL. Everything else is default:
  auth mode ``off`` (the caller is whoever the ``X-Agent-Name`` header says; no tokens),
  log level INFO (uvicorn's access line and the hub's audit line for every send and
  read, written to ``<data_dir>/peer-server.log``), retention 14 days, purge hourly.
- Storage: one SQLite file through **one** aiosqlite connection (one background thread),
  so every statement of every request is serialised on it. ``journal_mode=WAL``,
  ``busy_timeout=5000``, ``foreign_keys=ON``; ``synchronous`` is left at SQLite's default,
  which for this build is FULL (2) in WAL mode too, so every commit fsyncs the WAL. A send
  is one INSERT and one commit; a read+ack is an ``INSERT OR IGNORE INTO reads`` and one
  commit (plus a few SELECTs: the caller, the object, the roster).

API as the benchmark uses it (auth off, so the identity header is the whole credential):

- join: ``POST /actors`` ``{"preferredUsername": NAME}`` -> 201 (409 if the name is held).
- send: ``POST /actors/<me>/outbox`` with ``X-Agent-Name: <me>`` and an AS2 Create
  wrapping a Note, as the peer's own client sends it -> 201 and the stored Note, whose
  ``id`` is ``<public_url>/objects/<32 hex>``.
- list: ``GET /actors/<me>/inbox[?since=CURSOR]`` -> unread summaries, oldest first, 50 a
  page, with a ``cursor`` to pass back as ``since``; ``?view=count`` gives only the count.
- read+ack: ``POST /objects/<hex>/read`` with ``X-Agent-Name: <recipient>`` -> 200 and the
  full Note; **one request** marks it handled for that reader. Reading it again is 200
  again (idempotent), so a load test must never reuse an id.

Run ``python -m bench.peer --workdir DIR`` for an end-to-end check that installs, starts,
stocks and drives the peer with wrk (loopback only, bounded in time).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench.harness import free_port

PEER_PACKAGE = "agent-inbox"
PEER_VERSION = "0.34.0"
PEER_PYTHON = (3, 13)
#: Where pyenv keeps 3.13 on the project's machines; ``PEER_PYTHON`` overrides it.
PYENV_PYTHON = Path("/root/.pyenv/versions/3.13.0/bin/python3.13")
BODY = "Please add a /v1/export endpoint that streams NDJSON. " * 18  # about 1 KB
SENDER = "bench_sender"
RECIPIENT = "bench_recipient"
IDENTITY_HEADER = "X-Agent-Name"
AS2_CONTEXT = "https://www.w3.org/ns/activitystreams"
START_TIMEOUT = 60.0
LOG_NAME = "peer-server.log"
WRK_DIR = Path(__file__).resolve().parent / "wrk"
_HEX_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class PeerSetup:
    """What the load scripts need to talk to a prepared peer.

    The tokens are ``None`` because the peer's default auth mode is ``off``: the
    ``X-Agent-Name`` header is taken at its word and no device token exists or is needed.
    """

    base_url: str
    sender: str
    recipient: str
    sender_headers: dict[str, str]
    recipient_headers: dict[str, str]
    send_path: str
    send_body: str
    sender_token: str | None = None
    recipient_token: str | None = None
    read_path_template: str = "/objects/{id}/read"
    cheap_path: str = "/health"


# -- install ------------------------------------------------------------------------------


def _python_version(python: Path) -> tuple[int, int] | None:
    try:
        out = subprocess.run(
            [str(python), "-c", "import sys; print(sys.version_info[0], sys.version_info[1])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return (int(out[0]), int(out[1])) if len(out) == 2 else None


def find_python313() -> Path:
    """The Python 3.13 interpreter to build the peer's venv with, or a clear error."""
    candidates: list[Path] = []
    if os.environ.get("PEER_PYTHON"):
        candidates.append(Path(os.environ["PEER_PYTHON"]))
    candidates.append(PYENV_PYTHON)
    found = shutil.which("python3.13")
    if found:
        candidates.append(Path(found))
    for python in candidates:
        if python.is_file() and _python_version(python) == PEER_PYTHON:
            return python
    tried = ", ".join(str(c) for c in candidates)
    raise RuntimeError(
        f"{PEER_PACKAGE} {PEER_VERSION} needs Python 3.12+ and the bench builds its venv with "
        f"Python 3.13, which was not found (tried: {tried}). Install it (pyenv install 3.13.0) "
        "or point PEER_PYTHON at a python3.13 binary."
    )


def _installed_version(python: Path) -> str | None:
    try:
        result = subprocess.run(
            [
                str(python),
                "-c",
                f"import importlib.metadata as m; print(m.version({PEER_PACKAGE!r}))",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def peer_install(workdir: Path) -> Path:
    """Create (or reuse) ``workdir/agent-inbox-venv`` with agent-inbox==PEER_VERSION.

    Returns the venv's ``bin`` directory (``python`` and ``agent-inbox`` are in it). A venv
    that already has the right version on Python 3.13 is reused without touching pip.
    """
    venv = workdir / "agent-inbox-venv"
    bin_dir = venv / "bin"
    python = bin_dir / "python"
    if (
        python.exists()
        and _python_version(python) == PEER_PYTHON
        and _installed_version(python) == PEER_VERSION
        and (bin_dir / "agent-inbox").exists()
    ):
        return bin_dir
    base = find_python313()
    workdir.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(base), "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--quiet",
            f"{PEER_PACKAGE}=={PEER_VERSION}",
        ],
        check=True,
        timeout=900,
    )
    got = _installed_version(python)
    if got != PEER_VERSION:
        raise RuntimeError(f"installed {PEER_PACKAGE} {got!r}, expected {PEER_VERSION}")
    return bin_dir


def _bin_dir(venv: Path) -> Path:
    """Accept the venv, its ``bin`` directory or its python, and return ``bin``."""
    if venv.is_file():
        return venv.parent
    if (venv / "bin").is_dir():
        return venv / "bin"
    return venv


# -- run ----------------------------------------------------------------------------------


def _port_is_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def peer_start(venv: Path, port: int, data_dir: Path) -> subprocess.Popen[bytes]:
    """Start ``agent-inbox serve`` on 127.0.0.1:port, storing in ``data_dir``; wait for it.

    One uvicorn process, one event loop, one aiosqlite connection; SQLite in WAL mode with
    synchronous=FULL (the SQLite default, which the peer does not change); auth off; INFO
    logging to ``data_dir/peer-server.log``. Every other ``AGENT_INBOX_*`` /
    ``AGENT_MAILBOX_*`` variable is removed from its environment so it runs on defaults.
    Waits up to 60 s for ``GET /health`` and for ``GET /`` to report PEER_VERSION.
    """
    executable = _bin_dir(venv) / "agent-inbox"
    if not executable.exists():
        raise RuntimeError(f"{executable} does not exist: run peer_install first")
    if not _port_is_free(port):
        raise RuntimeError(f"127.0.0.1:{port} is already in use")
    data_dir.mkdir(parents=True, exist_ok=True)
    base_url = f"http://127.0.0.1:{port}"
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("AGENT_INBOX_", "AGENT_MAILBOX_"))
    }
    env.update(
        {
            "AGENT_INBOX_HOST": "127.0.0.1",
            "AGENT_INBOX_PORT": str(port),
            "AGENT_INBOX_DB": str(data_dir / "agent-mailbox.db"),
            "AGENT_INBOX_PUBLIC_URL": base_url,
        }
    )
    log_path = data_dir / LOG_NAME
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [str(executable), "serve"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    deadline = time.monotonic() + START_TIMEOUT
    with httpx.Client(base_url=base_url, timeout=2) as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(
                    f"agent-inbox exited with {proc.returncode} while starting:\n"
                    + _log_tail(log_path)
                )
            try:
                if client.get("/health").status_code == 200:
                    version = client.get("/").json().get("version")
                    if version != PEER_VERSION:
                        peer_stop(proc)
                        raise RuntimeError(f"peer reports version {version!r}")
                    return proc
            except httpx.HTTPError:
                pass
            time.sleep(0.2)  # still starting; there is nothing to wait on but polling
    peer_stop(proc)
    raise RuntimeError(
        f"agent-inbox did not answer on {base_url} within {START_TIMEOUT:.0f} s:\n"
        + _log_tail(log_path)
    )


def peer_stop(proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    """Stop a server started by :func:`peer_start` (SIGTERM, then SIGKILL)."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


# -- prepare and stock --------------------------------------------------------------------


def _headers(name: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "Accept": "application/json",
        IDENTITY_HEADER: name,
    }


def _join(client: httpx.Client, name: str) -> None:
    """Join under ``name``; a 409 (already held) is reused, since auth is off."""
    response = client.post("/actors", json={"preferredUsername": name})
    if response.status_code not in (201, 409):
        raise RuntimeError(f"join {name}: {response.status_code} {response.text[:300]}")
    check = client.get(f"/actors/{name}")
    if check.status_code != 200 or check.json().get("preferredUsername") != name:
        raise RuntimeError(f"actor {name} not found after join: {check.status_code}")


def send_document(recipient: str, body: str = BODY) -> dict[str, Any]:
    """The outbox document, shaped as the peer's own client sends it (Create of a Note)."""
    return {
        "@context": AS2_CONTEXT,
        "type": "Create",
        "object": {"type": "Note", "to": [recipient], "content": body},
    }


def peer_prepare(base_url: str) -> PeerSetup:
    """Join a sender and a recipient (idempotently) and build the 1 KB send request."""
    base_url = base_url.rstrip("/")
    with httpx.Client(base_url=base_url, timeout=10) as client:
        _join(client, SENDER)
        _join(client, RECIPIENT)
    return PeerSetup(
        base_url=base_url,
        sender=SENDER,
        recipient=RECIPIENT,
        sender_headers=_headers(SENDER),
        recipient_headers=_headers(RECIPIENT),
        send_path=f"/actors/{SENDER}/outbox",
        send_body=json.dumps(send_document(RECIPIENT), separators=(",", ":")),
    )


def object_leaf(object_id: str) -> str:
    """``http://host/objects/<hex>`` (what the peer emits) -> ``<hex>`` (what routes take)."""
    leaf = object_id.rstrip("/").rsplit("/", 1)[-1]
    if not _HEX_ID.match(leaf):
        raise RuntimeError(f"unexpected object id {object_id!r}")
    return leaf


def peer_stock(base_url: str, setup: PeerSetup, count: int, concurrency: int = 4) -> list[str]:
    """Send ``count`` 1 KB messages to the recipient; return their ids, ready to read+ack.

    The ids come from the 201 responses (the stored Note's ``id``), so no inbox listing is
    needed; :func:`peer_inbox_ids` gives the same ids from the recipient's side.
    """
    base_url = base_url.rstrip("/")
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    with httpx.Client(base_url=base_url, timeout=30, limits=limits) as client:

        def send(start: int, n: int) -> list[str]:
            ids = []
            for _ in range(n):
                response = client.post(
                    setup.send_path, content=setup.send_body, headers=setup.sender_headers
                )
                if response.status_code != 201:
                    raise RuntimeError(f"stock send: {response.status_code} {response.text[:300]}")
                ids.append(object_leaf(response.json()["id"]))
            return ids

        workers = max(1, min(concurrency, count))
        shares = [count // workers + (1 if i < count % workers else 0) for i in range(workers)]
        with ThreadPoolExecutor(max_workers=workers) as pool:
            chunks = list(pool.map(send, range(workers), shares))
    return [object_id for chunk in chunks for object_id in chunk]


def peer_inbox_ids(base_url: str, setup: PeerSetup, limit: int | None = None) -> list[str]:
    """The recipient's unread ids, oldest first, paging ``GET /actors/<me>/inbox``.

    Each page is at most 50 and costs the peer a scan of every stored object, so this is
    for checks, not for the measured path.
    """
    ids: list[str] = []
    since: str | None = None
    path = f"/actors/{setup.recipient}/inbox"
    with httpx.Client(base_url=base_url.rstrip("/"), timeout=30) as client:
        while limit is None or len(ids) < limit:
            params = {"since": since} if since else {}
            response = client.get(path, params=params, headers=setup.recipient_headers)
            response.raise_for_status()
            page = response.json()
            items = page.get("items", [])
            ids.extend(object_leaf(item["id"]) for item in items)
            if not items or not page.get("more"):
                break
            since = page["cursor"]
    return ids if limit is None else ids[:limit]


def peer_unread(base_url: str, setup: PeerSetup) -> int:
    """How many messages the recipient has not read+acked (``?view=count``)."""
    response = httpx.get(
        f"{base_url.rstrip('/')}/actors/{setup.recipient}/inbox",
        params={"view": "count"},
        headers=setup.recipient_headers,
        timeout=30,
    )
    response.raise_for_status()
    return int(response.json()["unread"])


# -- wrk ----------------------------------------------------------------------------------


def peer_wrk_env(
    setup: PeerSetup,
    ids: Sequence[str] = (),
    *,
    threads: int = 1,
    ids_file: Path | None = None,
) -> dict[str, str]:
    """Environment for ``bench/wrk/peer_send.lua`` and ``peer_read.lua``.

    The ids are written one a line to ``ids_file`` (a new temporary file if not given),
    whose path goes in PEER_WRK_IDS. ``threads`` must equal wrk's ``-t``: thread ``i``
    reads lines ``i+1, i+1+threads, ...`` so no id is read twice.
    """
    if ids_file is None:
        fd, name = tempfile.mkstemp(prefix="peer-ids-", suffix=".txt")
        os.close(fd)
        ids_file = Path(name)
    ids_file.write_text("".join(f"{object_id}\n" for object_id in ids))
    return {
        "PEER_SEND_PATH": setup.send_path,
        "PEER_SEND_BODY": setup.send_body,
        "PEER_SENDER": setup.sender,
        "PEER_READER": setup.recipient,
        "PEER_WRK_IDS": str(ids_file),
        "PEER_WRK_THREADS": str(threads),
        "PEER_CHEAP_PATH": setup.cheap_path,
    }


@dataclass
class WrkResult:
    connections: int
    threads: int
    requests: int
    rps: float
    status_errors: int
    socket_errors: int
    #: peer_send.lua: answers that were 201 / anything else.
    created: int
    #: peer_read.lua: reads answered 200 with the Note / requests sent to the cheap route
    #: because the thread's ids had run out / any other answer.
    claimed: int
    empty: int
    bad: int
    #: peer_read.lua: ids each thread handed out, in flight at the end included.
    issued: list[int]
    p50_ms: float
    p99_ms: float
    output: str


def run_wrk(
    script: str,
    base_url: str,
    env: dict[str, str],
    *,
    connections: int,
    threads: int,
    seconds: int,
) -> WrkResult:
    """Run ``wrk`` with ``bench/wrk/<script>`` against a loopback URL and parse its output."""
    if not base_url.startswith(("http://127.0.0.1", "http://localhost")):
        raise RuntimeError(f"refusing to load anything but loopback: {base_url}")
    wrk = shutil.which("wrk") or "/usr/bin/wrk"
    command = [
        wrk,
        f"-t{threads}",
        f"-c{connections}",
        f"-d{seconds}s",
        "--timeout",
        "10s",
        "-s",
        str(WRK_DIR / script),
        base_url,
    ]
    done = subprocess.run(
        command,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=True,
    )
    summary: dict[str, Any] = {}
    for line in done.stdout.splitlines():
        if line.startswith("WRK_JSON "):
            summary = json.loads(line[len("WRK_JSON ") :])
    if not summary:
        raise RuntimeError(f"wrk printed no WRK_JSON line:\n{done.stdout}\n{done.stderr}")
    requests = int(summary["requests"])
    return WrkResult(
        connections=connections,
        threads=threads,
        requests=requests,
        rps=requests / (int(summary["duration_us"]) / 1e6),
        status_errors=int(summary["status_errors"]),
        socket_errors=int(summary["socket_errors"]),
        created=int(summary.get("created", 0)),
        claimed=int(summary.get("claimed", 0)),
        empty=int(summary.get("empty", 0)),
        bad=int(summary.get("bad", 0)),
        issued=[int(n) for n in summary.get("issued", [])],
        p50_ms=int(summary["p50_us"]) / 1000,
        p99_ms=int(summary["p99_us"]) / 1000,
        output=done.stdout,
    )


def unused_ids(ids: Sequence[str], issued: Sequence[int]) -> list[str]:
    """The ids a peer_read.lua run did not hand out (it strides them over its threads)."""
    threads = len(issued)
    if threads == 0:
        return list(ids)
    return [object_id for k, object_id in enumerate(ids) if k // threads >= issued[k % threads]]


def ids_needed(reads_per_second: float, seconds: float, margin: float = 1.5) -> int:
    """Ids to stock so a read run of ``seconds`` at that rate does not run dry."""
    return math.ceil(reads_per_second * seconds * margin)


# -- end-to-end check ---------------------------------------------------------------------


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise RuntimeError(f"check failed: {what}")


def _sample_checks(setup: PeerSetup, ids: list[str]) -> None:
    """One send and one read+ack by hand with their bodies checked; the listing agrees."""
    with httpx.Client(base_url=setup.base_url, timeout=10) as client:
        sent = client.post(setup.send_path, content=setup.send_body, headers=setup.sender_headers)
        _check(sent.status_code == 201, f"send answered {sent.status_code}: {sent.text[:300]}")
        note = sent.json()
        _check(note["content"] == BODY, "sent content differs")
        _check(note["to"] == [f"{setup.base_url}/actors/{setup.recipient}"], "sent to whom?")
        leaf = object_leaf(note["id"])
        _check(leaf in peer_inbox_ids(setup.base_url, setup), "sent id not in the inbox")
        got = client.post(f"/objects/{leaf}/read", headers=setup.recipient_headers)
        _check(got.status_code == 200, f"read answered {got.status_code}: {got.text[:300]}")
        _check(got.json()["content"] == BODY, "read content differs")
        _check(leaf not in peer_inbox_ids(setup.base_url, setup), "read id still unread")
        print(f"sample send: 201, {len(sent.content)} B Note {leaf}; its read+ack: 200")
    listed = peer_inbox_ids(setup.base_url, setup)
    _check(set(listed) == set(ids), "the inbox listing does not match the stocked ids")
    print(f"inbox listing: {len(listed)} unread, exactly the stocked ids")


def _report(kind: str, result: WrkResult) -> None:
    extra = ""
    if kind == "read":
        extra = f" acked={result.claimed} ran-dry={result.empty}"
    print(
        f"{kind:5} c={result.connections:<3} t={result.threads} {result.rps:8.1f} req/s "
        f"p50={result.p50_ms:.1f}ms p99={result.p99_ms:.1f}ms "
        f"non2xx={result.status_errors} sock={result.socket_errors}{extra}",
        flush=True,
    )


def verify(workdir: Path, connections: Iterable[int], seconds: int, stock: int) -> int:
    bin_dir = peer_install(workdir)
    port = free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="peer-data-", dir=workdir))
    proc = peer_start(bin_dir, port, data_dir)
    base_url = f"http://127.0.0.1:{port}"
    failures = 0
    try:
        setup = peer_prepare(base_url)
        started = time.monotonic()
        ids = peer_stock(base_url, setup, stock)
        print(f"stocked {len(ids)} in {time.monotonic() - started:.1f} s; data in {data_dir}")
        _sample_checks(setup, ids)
        for c in connections:
            t = min(2, c)
            result = run_wrk(
                "peer_send.lua",
                base_url,
                peer_wrk_env(setup, threads=t, ids_file=data_dir / "ids.txt"),
                connections=c,
                threads=t,
                seconds=seconds,
            )
            _report("send", result)
            # Every completed request must have been a 201.
            failures += result.socket_errors + (result.requests - result.created)
        rate = 0.0
        for c in connections:
            t = min(2, c)
            need = max(stock, ids_needed(rate, seconds, 2.0))
            for _attempt in range(3):
                if len(ids) < need:
                    ids += peer_stock(base_url, setup, need - len(ids))
                before = peer_unread(base_url, setup)
                result = run_wrk(
                    "peer_read.lua",
                    base_url,
                    peer_wrk_env(setup, ids, threads=t, ids_file=data_dir / "ids.txt"),
                    connections=c,
                    threads=t,
                    seconds=seconds,
                )
                acked = before - peer_unread(base_url, setup)
                _report("read", result)
                print(f"      unread fell by {acked} (script counted {result.claimed})")
                ids = unused_ids(ids, result.issued)
                rate = max(rate, result.claimed / seconds)
                if result.empty == 0:
                    break
                need *= 3
                print(f"      ran out of ids; rerunning with {need}")
            failures += result.status_errors + result.socket_errors + result.bad
        print(f"ids needed for {seconds} s at the best read rate: {ids_needed(rate, seconds, 1)}")
    finally:
        peer_stop(proc)
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "peer")
    parser.add_argument("--connections", default="1,8,32")
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--stock", type=int, default=2000)
    args = parser.parse_args(argv)
    connections = [int(c) for c in args.connections.split(",")]
    return verify(args.workdir, connections, args.seconds, args.stock)


if __name__ == "__main__":
    sys.exit(main())
