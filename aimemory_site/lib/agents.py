"""Agent kinds: which harness a session runs in (``from_agent`` on what it sends).

Django-free: the session-start hook detects the kind before it calls the server.
"""

from __future__ import annotations

AGENT_OTHER = "other"
AGENT_KINDS = ("claude", "codex", "kimi", "opencode", "gemini", "cursor", AGENT_OTHER)


def agent_normalize(agent: str | None) -> str:
    """Map a harness's agent name to a known kind; anything else is ``other``."""
    kind = (agent or "").strip().lower().replace("_", "-")
    if kind in ("claude-code", "claudecode"):
        kind = "claude"
    return kind if kind in AGENT_KINDS else AGENT_OTHER
