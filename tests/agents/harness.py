"""What the agent tests (and ``bench.agent_wake``) drive the real clients with: their
throwaway settings, tmux for the interactive ones, and the processes they leave, read
from /proc.

Every process a test starts carries ``RUN_ENV`` in its environment, and so does every
process those start (hooks, detached waiters, Codex's app-server daemon): that is how
the tests find them, and how teardown kills them all and nothing else.

Protocol facts these rest on (Claude Code 2.1.332, Codex 0.171.0; tests/agents/standin.py
has the wire side):

- Claude Code starts without its first-run screens when ``~/.claude.json`` has
  ``hasCompletedOnboarding``, the API key's last 20 characters in
  ``customApiKeyResponses.approved``, and per project ``hasTrustDialogAccepted`` (and
  ``enabledMcpjsonServers`` for a repository's ``.mcp.json``). It sets
  ``CLAUDE_CODE_ENTRYPOINT=cli`` for the hooks of an interactive session and ``sdk-cli``
  in print mode (``claude -p``).
- Codex takes a custom model provider (``wire_api = "responses"``,
  ``requires_openai_auth = false``, the key from ``env_key``) without any login, reads a
  repository's ``.codex/`` only in a trusted project (``projects.<path>.trust_level``),
  and asks the person to review new hooks at start ("Hooks need review"; its second
  choice trusts them all and is remembered in ``$CODEX_HOME/config.toml``). By default
  the TUI starts an app-server daemon, which runs the hooks and outlives the TUI.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.agents.standin import Request, StandIn
from tests.mcp import node_clients

RUN_ENV = "AGENT_TEST_RUN_ID"
# Generous: a CLI on a loaded 2-core machine. None of these is what a test claims.
COMMAND_TIMEOUT_SECONDS = 120
# Not what the tests claim either: a client starting, or a first turn, on a loaded machine.
START_SECONDS = 90
SENDER = "agents-sender"
# Claude Code remembers an approved key by its last 20 characters.
API_KEY = "sk-ant-stand-in-key-0123456789abcdefghij"
STANDIN_KEY_ENV = "STANDIN_API_KEY"
PROVIDER = "standin"
VENV_BIN = Path(sys.executable).parent
PROC = Path("/proc")


@dataclass(frozen=True)
class Process:
    pid: int
    arguments: tuple[str, ...]

    @property
    def command(self) -> str:
        return " ".join(self.arguments)


def _state(pid: int) -> str | None:
    try:
        text = PROC.joinpath(str(pid), "stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()[0]


def marked(run: str) -> list[Process]:
    """The live processes (zombies left out) whose environment carries run id ``run``."""
    needle = f"{RUN_ENV}={run}".encode()
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = entry.joinpath("environ").read_bytes()
            arguments = entry.joinpath("cmdline").read_bytes()
        except OSError:
            continue  # gone, or not ours to read
        if needle not in environ.split(b"\0") or _state(int(entry.name)) in (None, "Z"):
            continue
        parts = arguments.decode(errors="replace").rstrip("\0").split("\0")
        found.append(Process(int(entry.name), tuple(parts)))
    return found


def is_waiter(process: Process) -> bool:
    """An ai-memory process that waits for mail: ``hook wait`` (Claude Code's, running)
    or Codex's detached waiter."""
    arguments = process.arguments
    if any("codex_wake" in argument for argument in arguments):
        return True
    ours = any("ai-memory" in argument or "aimemory_site" in argument for argument in arguments)
    return ours and "hook" in arguments and "wait" in arguments


def waiters(run: str) -> list[Process]:
    return [process for process in marked(run) if is_waiter(process)]


def is_codex(process: Process) -> bool:
    """A process of the Codex client: its node launcher, its TUI, its app-server daemon."""
    first = process.arguments[:2]
    return any(Path(argument).name == "codex" for argument in first)


def is_claude(process: Process) -> bool:
    first = process.arguments[:2]
    return any(Path(argument).name == "claude" for argument in first)


def kill(pids: Iterable[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue


# How soon a waiter must end once the client that ran its hook was killed (docs/agents.md).
WAITER_GONE_WITHIN_SECONDS = 5.0


def kill_then_no_waiter(run: str, clients: list[int]) -> None:
    """SIGKILL ``clients`` (at least one) and fail unless every waiter of run ``run`` has
    ended within ``WAITER_GONE_WITHIN_SECONDS``."""
    assert clients
    kill(clients)
    killed = time.monotonic()
    wait_until(
        lambda: not waiters(run),
        "every waiter ended",
        WAITER_GONE_WITHIN_SECONDS - (time.monotonic() - killed),
    )


def kill_marked(run: str, deadline_s: float = 30) -> list[Process]:
    """SIGKILL every process of run ``run`` until none is left; return those it found."""
    killed: list[Process] = []
    end = time.monotonic() + deadline_s
    while (left := marked(run)) and time.monotonic() < end:
        killed += left
        kill(process.pid for process in left)
        time.sleep(0.05)  # other programs' processes: /proc is all there is to wait on
    return killed


def connected_to(pid: int, port: int) -> bool:
    """Whether ``pid`` holds an established TCP connection to 127.0.0.1:``port``."""
    inodes = set()
    try:
        for line in PROC.joinpath(str(pid), "net", "tcp").read_text().splitlines()[1:]:
            fields = line.split()
            # remote address, state 01 = ESTABLISHED
            if fields[2].endswith(f":{port:04X}") and fields[3] == "01":
                inodes.add(fields[9])
        descriptors = list(PROC.joinpath(str(pid), "fd").iterdir())
    except OSError:
        return False
    for descriptor in descriptors:
        try:
            target = str(descriptor.readlink())
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


def wait_until(
    condition: Callable[[], bool], what: str, deadline_s: float, pause: float = 0.05
) -> None:
    """Poll ``condition()`` until true; fail naming ``what`` after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while not condition():
        assert time.monotonic() < end, f"{what}: not within {deadline_s}s"
        time.sleep(pause)  # the clients' own processes and screens: nothing to block on


# ---- the clients' settings ---------------------------------------------------------------


@dataclass
class Agents:
    """A throwaway HOME (and CODEX_HOME in it) for the clients, and their environment."""

    run: str
    home: Path
    standin: StandIn
    server_url: str

    @property
    def codex_home(self) -> Path:
        return self.home / ".codex"

    def environment(self) -> dict[str, str]:
        env = node_clients.node_environment(self.home)
        env.pop("TMUX", None)
        env.pop("TMUX_PANE", None)
        # The hooks run ``ai-memory``, and Codex's waiter runs ``codex``: both on PATH.
        codex_bin = node_clients.CODEX_PREFIX / "node_modules" / ".bin"
        env["PATH"] = os.pathsep.join([str(VENV_BIN), str(codex_bin), env.get("PATH", "")])
        env |= {
            RUN_ENV: self.run,
            "AI_MEMORY_SERVER_URL": self.server_url,
            "ANTHROPIC_BASE_URL": self.standin.url,
            "ANTHROPIC_API_KEY": API_KEY,
            "CODEX_HOME": str(self.codex_home),
            STANDIN_KEY_ENV: API_KEY,
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "TERM": "xterm-256color",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CEILING_DIRECTORIES": str(self.home.parent),
        }
        return env

    def trust_claude(self, repo: Path) -> None:
        """Claude Code's first-run screens, answered ahead for ``repo``."""
        path = self.home / ".claude.json"
        config = json.loads(path.read_text()) if path.exists() else {}
        config |= {
            "hasCompletedOnboarding": True,
            "lastOnboardingVersion": node_clients.CLAUDE_CODE_VERSION,
            "theme": "dark",
            "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
        }
        config.setdefault("projects", {})[str(repo)] = {
            "hasTrustDialogAccepted": True,
            "hasCompletedProjectOnboarding": True,
            "enabledMcpjsonServers": ["ai-memory"],
            "allowedTools": [],
        }
        path.write_text(json.dumps(config, indent=2))

    def configure_codex(self, *repos: Path) -> None:
        """``$CODEX_HOME/config.toml``: the stand-in as the model, ``repos`` trusted (which
        Codex needs before it reads a repository's ``.codex/``). ``ai-memory init`` writes
        the repository's own files, never this one."""
        lines = [
            f'model_provider = "{PROVIDER}"',
            'model = "gpt-5-codex"',
            "check_for_update_on_startup = false",
            "",
            f"[model_providers.{PROVIDER}]",
            'name = "stand-in"',
            f'base_url = "{self.standin.url}/v1"',
            'wire_api = "responses"',
            f'env_key = "{STANDIN_KEY_ENV}"',
            "requires_openai_auth = false",
        ]
        for repo in repos:
            lines += ["", f"[projects.{json.dumps(str(repo))}]", 'trust_level = "trusted"']
        self.codex_home.joinpath("config.toml").write_text("\n".join(lines) + "\n")


# ---- tmux ---------------------------------------------------------------------------------


class Tmux:
    """A tmux server of its own (``-L``), for interactive clients; ``kill`` ends it."""

    def __init__(self) -> None:
        self.socket = f"ai-memory-agents-{uuid.uuid4().hex[:12]}"

    def _tmux(self, *args: str, env: dict[str, str] | None = None) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, f"tmux {args[0]}: {done.stderr}"
        return done.stdout

    def start(self, name: str, argv: list[str], *, cwd: Path, env: dict[str, str]) -> None:
        """Run ``argv`` in a new 200x50 window, with exactly ``env`` as its environment."""
        assignments = [f"{key}={value}" for key, value in sorted(env.items())]
        command = shlex.join(["env", "-i", *assignments, *argv])
        # The window stays when its program ends, so its last screen can be read.
        self._tmux(
            "start-server", ";", "set-option", "-g", "remain-on-exit", "on", ";",
            "new-session", "-d", "-s", name, "-x", "200", "-y", "50", "-c", str(cwd), command,
            env={**os.environ, "TERM": "xterm-256color"},
        )  # fmt: skip

    def ended(self, name: str) -> bool:
        """Whether the program in the window has ended."""
        return self._tmux("display-message", "-p", "-t", name, "#{pane_dead}").strip() == "1"

    def screen(self, name: str) -> str:
        return self._tmux("capture-pane", "-p", "-t", name)

    def type(self, name: str, text: str) -> None:
        """Type ``text`` and press Enter (apart: a fast Enter may join a paste)."""
        self._tmux("send-keys", "-t", name, "-l", text)
        time.sleep(0.3)  # let the TUI take the text in before the Enter that submits it
        self._tmux("send-keys", "-t", name, "Enter")

    def keys(self, name: str, *keys: str) -> None:
        self._tmux("send-keys", "-t", name, *keys)

    def wait_for_screen(self, name: str, text: str, deadline_s: float) -> str:
        """Poll the window until it shows ``text``; its screen then."""
        end = time.monotonic() + deadline_s
        while text not in (screen := self.screen(name)):
            assert not self.ended(name), f"the program ended before showing {text!r}:\n{screen}"
            assert time.monotonic() < end, f"{text!r} not on screen in {deadline_s}s:\n{screen}"
            time.sleep(0.2)  # a terminal screen: polling is all tmux offers
        return screen

    def press_until(
        self, name: str, key: str, shown: Callable[[str], bool], deadline_s: float
    ) -> str:
        """Press ``key`` until the screen satisfies ``shown``, again every 2 s (a TUI may
        drop a key that comes while it is still drawing); the screen then. Only for keys
        that do no harm pressed twice."""
        end = time.monotonic() + deadline_s
        while True:
            self.keys(name, key)
            again = time.monotonic() + 2
            while time.monotonic() < again:
                if shown(screen := self.screen(name)):
                    return screen
                assert not self.ended(name), f"the program ended:\n{screen}"
                assert time.monotonic() < end, f"{key} did not do it in {deadline_s}s:\n{screen}"
                time.sleep(0.2)  # a terminal screen: polling is all tmux offers

    def kill(self) -> None:
        subprocess.run(
            ["tmux", "-L", self.socket, "kill-server"],
            capture_output=True,
            timeout=30,
            check=False,
        )
        # The socket file stays behind otherwise.
        directory = Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}"
        directory.joinpath(self.socket).unlink(missing_ok=True)


# ---- the server, the repository, the idle sessions -----------------------------------------


@dataclass
class Server:
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def register(self, project: str) -> None:
        """A session start of ``project`` (which creates it), as an agent's would be."""
        answer = httpx.post(
            f"{self.url}/api/v1/sessions",
            json={"workspace": "default", "project": project, "session_id": f"{project}-1"},
            timeout=30,
        )
        assert answer.status_code in (200, 201), answer.text

    def send(self, to_project: str, subject: str = "export endpoint") -> None:
        """Mail from project ``SENDER`` to ``to_project`` (workspace default)."""
        answer = httpx.post(
            f"{self.url}/api/v1/messages",
            json={
                "to_workspace": "default",
                "to_project": to_project,
                "from_workspace": "default",
                "from_project": SENDER,
                "subject": subject,
                "body": "Add a /v1/export endpoint that streams NDJSON.",
            },
            timeout=30,
        )
        assert answer.status_code == 201, answer.text


@dataclass
class Repo:
    path: Path
    project: str
    init_output: str


def init_repo(agents: Agents, parent: Path) -> Repo:
    """A new git repository with ``ai-memory init`` run in it (its own project name), and
    the clients' first-run questions about it answered ahead."""
    project = f"agents-{uuid.uuid4().hex[:10]}"
    path = parent / project
    path.mkdir()
    env = agents.environment()
    subprocess.run(["git", "init", "-q", str(path)], env=env, check=True, timeout=60)
    done = subprocess.run(
        ["ai-memory", "init", "--project", project],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    agents.trust_claude(path)
    agents.configure_codex(path)
    return Repo(path, project, done.stdout)


def parked_waiters(agents: Agents, port: int) -> set[int]:
    """The waiters of run ``agents.run`` whose session wait is open on the server."""
    return {waiter.pid for waiter in waiters(agents.run) if connected_to(waiter.pid, port)}


def wait_parked(agents: Agents, port: int, *, besides: Iterable[int] = ()) -> set[int]:
    """Until a waiter other than ``besides`` is parked on the server; the parked ones."""
    parked: set[int] = set()

    def found() -> bool:
        nonlocal parked
        parked = parked_waiters(agents, port)
        return bool(parked.difference(besides))

    wait_until(found, "a hook's waiter parked on the server", START_SECONDS)
    return parked


def start_idle_claude(
    claude: Path, agents: Agents, repo: Repo, tmux: Tmux, port: int, standin: StandIn
) -> None:
    """Claude Code in a tmux window, one turn done, its Stop hook parked on the server."""
    tmux.start("claude", [str(claude)], cwd=repo.path, env=agents.environment())
    tmux.wait_for_screen("claude", "❯", START_SECONDS)
    tmux.type("claude", "hello from the test")
    assert standin.wait_for("hello from the test", timeout=START_SECONDS), tmux.screen("claude")
    wait_parked(agents, port)


CODEX_HOOKS_REVIEW = "Hooks need review"
CODEX_TRUST_ALL = "Trust all and continue"


def codex_thread(request: Request) -> str:
    """The Codex session (thread) a Responses request belongs to."""
    metadata = json.loads(request.headers.get("x-codex-turn-metadata", "{}"))
    thread: str = metadata.get("thread_id", "")
    return thread


def start_idle_codex(
    codex: Path, agents: Agents, repo: Repo, tmux: Tmux, port: int, standin: StandIn
) -> str:
    """Codex in a tmux window, its hooks trusted as a person would at the prompt, one
    turn done and the Stop hook's waiter parked on the server; the session's id."""
    tmux.start("codex", [str(codex)], cwd=repo.path, env=agents.environment())
    screen = tmux.wait_for_screen("codex", CODEX_HOOKS_REVIEW, START_SECONDS)
    assert f"2. {CODEX_TRUST_ALL}" in screen
    # "2" selects the second choice, however often pressed; Enter confirms it.
    tmux.press_until("codex", "2", lambda shown: f"› 2. {CODEX_TRUST_ALL}" in shown, START_SECONDS)
    tmux.press_until("codex", "Enter", lambda shown: CODEX_HOOKS_REVIEW not in shown, START_SECONDS)
    tmux.wait_for_screen("codex", "Ask Codex", START_SECONDS)
    tmux.type("codex", "hello from the test")
    first = standin.wait_for("hello from the test", timeout=START_SECONDS)
    assert first is not None, tmux.screen("codex")
    wait_parked(agents, port)
    return codex_thread(first)
