"""``ai-memory hook session-start``: registers the session, prints the on-start block, and
never stands in the way of an agent's start."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from pytest_django.live_server_helper import LiveServer

from aimemory_site.cli.hook import detect_agent, session_payload
from aimemory_site.onstart.services import scope_line
from projects.models import AgentSession, Project
from tests.conftest import Persona

RunCli = Callable[..., subprocess.CompletedProcess[str]]
MakeRepo = Callable[[str], Path]

CLAUDE_TRANSCRIPT = "/home/dev/.claude/projects/-src-project-a/5f1c.jsonl"
CODEX_TRANSCRIPT = "/home/dev/.codex/sessions/2026/03/01/rollout-5f1c.jsonl"
SCOPE_A = scope_line(workspace="default", project="project-a") + "\n"


def hook_input(
    session_id: str, cwd: Path, transcript_path: str | None = None, source: str = "startup"
) -> str:
    """The JSON a harness writes to the hook's stdin (Claude Code's and Codex's shape)."""
    return json.dumps(
        {
            "session_id": session_id,
            "cwd": str(cwd),
            "hook_event_name": "SessionStart",
            "source": source,
            "transcript_path": transcript_path,
        }
    )


@pytest.fixture
def cli(make_cli: Callable[[str], RunCli], live_server: LiveServer) -> RunCli:
    return make_cli(live_server.url)


@pytest.mark.django_db(transaction=True)
def test_hook_registers_the_project_of_the_hook_cwd(
    cli: RunCli, make_repo: MakeRepo, tmp_path: Path
) -> None:
    repo = make_repo("project-a")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    result = cli(
        "hook", "session-start", cwd=elsewhere, stdin=hook_input("s-1", repo, CLAUDE_TRANSCRIPT)
    )

    # Nothing else to say: the block is only its last line, naming the project.
    assert (result.returncode, result.stdout, result.stderr) == (0, SCOPE_A, "")
    session = AgentSession.objects.select_related("project__workspace").get(session_id="s-1")
    assert (session.project.workspace.name, session.project.name) == ("default", "project-a")
    assert session.agent == "claude"


@pytest.mark.django_db(transaction=True)
def test_hook_prints_the_inbox_notice_when_mail_waits(cli: RunCli, make_repo: MakeRepo) -> None:
    repo_a, repo_b = make_repo("project-a"), make_repo("project-b")
    cli("hook", "session-start", cwd=repo_a, stdin=hook_input("a-1", repo_a))
    cli("hook", "session-start", cwd=repo_b, stdin=hook_input("b-1", repo_b))
    sent = cli(
        "message", "send", "--to-workspace", "default", "--to-project", "project-b",
        "Secret-free request body.",
        cwd=repo_a,
    )  # fmt: skip
    assert sent.returncode == 0, sent.stderr

    result = cli("hook", "session-start", cwd=repo_b, stdin=hook_input("b-2", repo_b))

    assert result.returncode == 0
    assert result.stdout.startswith(
        "📬 ai-memory: 1 cross-project message waiting in the default/project-b inbox."
    )
    assert result.stdout.endswith(
        "\n\n" + scope_line(workspace="default", project="project-b") + "\n"
    )
    assert "Secret-free request body." not in result.stdout


@pytest.mark.django_db(transaction=True)
def test_hook_follows_the_marker_without_saying_so_on_stderr(
    cli: RunCli, make_repo: MakeRepo
) -> None:
    repo = make_repo("project-a")
    (repo / ".ai-memory.toml").write_text('workspace = "acme"\nproject = "billing"\n')

    result = cli("hook", "session-start", cwd=repo, stdin=hook_input("s-1", repo))

    expected = scope_line(workspace="acme", project="billing") + "\n"
    assert (result.returncode, result.stdout, result.stderr) == (0, expected, "")
    assert Project.objects.filter(workspace__name="acme", name="billing").exists()


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("opt_in", [True, False], ids=["opted-in", "not-opted-in"])
def test_hook_prints_the_brief_when_the_marker_opts_in(
    cli: RunCli, make_repo: MakeRepo, opt_in: bool
) -> None:
    repo = make_repo("project-a")
    briefing = "true" if opt_in else "false"
    (repo / ".ai-memory.toml").write_text(
        f'project = "project-a"\n[briefing]\ninject_on_session_start = {briefing}\n'
    )
    assert cli("hook", "session-start", cwd=repo, stdin=hook_input("s-0", repo)).returncode == 0
    written = cli("page", "write", "_rules/testing", "Run make check first.", cwd=repo)
    assert written.returncode == 0, written.stderr

    result = cli("hook", "session-start", cwd=repo, stdin=hook_input("s-1", repo))

    assert result.returncode == 0
    if opt_in:
        assert result.stdout.startswith("📘 ai-memory brief for default/project-a:\n")
        assert "## _rules/testing\nRun make check first." in result.stdout
        assert result.stdout.endswith("\n\n" + SCOPE_A)
    else:
        assert result.stdout == SCOPE_A


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("stdin", ["", "not json", "[1, 2]"], ids=["empty", "garbage", "list"])
def test_hook_without_usable_input_registers_the_working_directory(
    cli: RunCli, make_repo: MakeRepo, stdin: str
) -> None:
    repo = make_repo("project-a")

    result = cli("hook", "session-start", cwd=repo, stdin=stdin)

    assert result.returncode == 0
    session = AgentSession.objects.select_related("project").get()
    assert session.project.name == "project-a"
    assert session.session_id.startswith("cli-")
    assert session.agent == "other"


def test_hook_is_silent_and_exits_0_when_the_server_is_unreachable(
    offline_cli: RunCli, make_repo: MakeRepo
) -> None:
    repo = make_repo("project-a")

    result = offline_cli("hook", "session-start", cwd=repo, stdin=hook_input("s-1", repo))

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("token", ["", "aim_not-a-token-of-this-server"], ids=["none", "unknown"])
def test_hook_says_in_one_stderr_line_that_the_server_wants_a_token(
    cli: RunCli, make_repo: MakeRepo, live_server: LiveServer, auth_on: str, token: str
) -> None:
    """The first user token turns authentication on: the hook must not just go quiet."""
    repo = make_repo("project-a")
    env = {"AI_MEMORY_AUTH_TOKEN": token} if token else {}

    result = cli("hook", "session-start", cwd=repo, stdin=hook_input("s-1", repo), env=env)

    if token:
        expected = (
            f"ai-memory: the server at {live_server.url} refused the token in "
            "AI_MEMORY_AUTH_TOKEN (401): it is unknown or revoked; set a valid one where "
            "the agent's hooks run (a token from `ai-memory manage issue_token USER`)\n"
        )
    else:
        expected = (
            f"ai-memory: the server at {live_server.url} requires a token (401): set "
            "AI_MEMORY_AUTH_TOKEN where the agent's hooks run (a token from "
            "`ai-memory manage issue_token USER`)\n"
        )
    assert (result.returncode, result.stdout, result.stderr) == (0, "", expected)
    assert not AgentSession.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_hook_is_silent_and_exits_0_when_the_server_refuses_otherwise(
    cli: RunCli, make_repo: MakeRepo, alice: Persona, bob: Persona
) -> None:
    repo = make_repo("project-a")
    alices = cli(
        "hook", "session-start", cwd=repo, stdin=hook_input("s-1", repo),
        env={"AI_MEMORY_AUTH_TOKEN": alice.token},
    )  # fmt: skip
    assert alices.stdout == SCOPE_A

    # bob's harness reports alice's session id: 409 session_taken.
    result = cli(
        "hook", "session-start", cwd=repo, stdin=hook_input("s-1", repo),
        env={"AI_MEMORY_AUTH_TOKEN": bob.token},
    )  # fmt: skip

    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


@pytest.mark.django_db(transaction=True)
def test_a_compact_hook_run_shows_no_handoff_and_the_next_session_gets_it(
    cli: RunCli, make_repo: MakeRepo
) -> None:
    repo = make_repo("project-a")
    assert cli("hook", "session-start", cwd=repo, stdin=hook_input("s-1", repo)).returncode == 0
    assert cli("handoff", "create", "Next: the pagination tests.", cwd=repo).returncode == 0

    compacted = cli(
        "hook", "session-start", cwd=repo, stdin=hook_input("s-2", repo, source="compact")
    )
    resumed = cli("hook", "session-start", cwd=repo, stdin=hook_input("s-1", repo, source="resume"))
    next_session = cli("hook", "session-start", cwd=repo, stdin=hook_input("s-3", repo))

    assert (compacted.returncode, compacted.stdout, compacted.stderr) == (0, SCOPE_A, "")
    assert resumed.stdout == SCOPE_A
    assert next_session.stdout.startswith("🤝 ai-memory handoff for default/project-a, written ")
    assert "Next: the pagination tests." in next_session.stdout


@pytest.mark.parametrize(
    ("hook_source", "sent"),
    [
        ("compact", "compact"),
        ("resume", "resume"),
        ("clear", "clear"),
        ("startup", "startup"),
        ("fork", None),
        (7, None),
        (None, None),
    ],
    ids=["compact", "resume", "clear", "startup", "unknown", "not-text", "absent"],
)
def test_hook_passes_the_harness_source_it_knows(
    tmp_path: Path, hook_source: object, sent: str | None
) -> None:
    """An unknown value is left out (a startup to the server) rather than refused: the
    server would answer 400, and the session would go unregistered."""
    hook = {"session_id": "s", "cwd": str(tmp_path), "source": hook_source}

    assert session_payload(hook, {}, None).get("source") == sent


@pytest.mark.parametrize(
    ("transcript_path", "environ", "agent"),
    [
        (CLAUDE_TRANSCRIPT, {}, "claude"),
        (CODEX_TRANSCRIPT, {}, "codex"),
        ("C:\\Users\\dev\\.codex\\sessions\\rollout.jsonl", {}, "codex"),
        (None, {"CLAUDE_PROJECT_DIR": "/src/project-a"}, "claude"),
        (None, {}, "other"),
    ],
    ids=["claude", "codex", "codex-windows", "claude-env", "unknown"],
)
def test_hook_tells_the_harness_from_its_input(
    transcript_path: str | None, environ: dict[str, str], agent: str
) -> None:
    assert detect_agent({"transcript_path": transcript_path}, environ) == agent


def test_agent_flag_overrides_detection(tmp_path: Path) -> None:
    payload = session_payload(
        {"cwd": str(tmp_path), "transcript_path": CLAUDE_TRANSCRIPT}, {}, "kimi"
    )

    assert payload["agent"] == "kimi"


@pytest.mark.parametrize(("opt_in", "expected"), [(True, True), (False, None)])
def test_hook_asks_for_the_brief_only_when_the_marker_opts_in(
    tmp_path: Path, opt_in: bool, expected: bool | None
) -> None:
    briefing = "true" if opt_in else "false"
    (tmp_path / ".ai-memory.toml").write_text(
        f'project = "p"\n[briefing]\ninject_on_session_start = {briefing}\n'
    )

    payload = session_payload({"session_id": "s", "cwd": str(tmp_path)}, {}, None)

    assert payload.get("inject_brief") is expected


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("command", "event"),
    [("session-start", "SessionStart"), ("user-prompt", "BeforeAgent")],
)
def test_for_gemini_cli_the_block_is_the_json_it_adds_to_the_context(
    cli: RunCli, make_repo: MakeRepo, command: str, event: str
) -> None:
    # Gemini CLI shows a hook's plain stdout to the person only, never to the model.
    repo = make_repo("project-a")

    result = cli("hook", command, "--agent", "gemini", cwd=repo, stdin=hook_input("g-1", repo))

    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout) == {
        "hookSpecificOutput": {"hookEventName": event, "additionalContext": SCOPE_A.rstrip("\n")}
    }
    assert AgentSession.objects.get(session_id="g-1").agent == "gemini"


def test_gemini_cli_is_told_from_claude_code_by_its_own_variable() -> None:
    # Gemini CLI sets CLAUDE_PROJECT_DIR as well, for Claude Code's hooks.
    both = {"GEMINI_PROJECT_DIR": "/src/a", "CLAUDE_PROJECT_DIR": "/src/a"}

    assert detect_agent({}, both) == "gemini"
    assert detect_agent({}, {"CLAUDE_PROJECT_DIR": "/src/a"}) == "claude"
