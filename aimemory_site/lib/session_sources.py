"""What a lifecycle hook says started a session: its ``source``.

Django-free: the session-start hook checks the value before it calls the server.
"""

from __future__ import annotations

SOURCE_STARTUP = "startup"
SOURCE_RESUME = "resume"
SOURCE_CLEAR = "clear"
SOURCE_COMPACT = "compact"
# Sent by ``ai-memory init``, which registers the project from a terminal: no agent reads
# its answer, so it must not take a handoff away from the next agent session.
SOURCE_INIT = "init"

# The harnesses' own values (Claude Code, Codex) and the CLI's.
SESSION_SOURCES = (SOURCE_STARTUP, SOURCE_RESUME, SOURCE_CLEAR, SOURCE_COMPACT, SOURCE_INIT)
