"""``memory_briefing``: the briefing as an MCP tool, a thin adapter over
``aimemory_site.onstart.selectors``. Its description is short on purpose: every agent pays
for it in tokens on every session."""

from __future__ import annotations

from typing import Any

from aimemory_site.lib.mcp_tool import (
    OWN_PROJECT,
    OWN_WORKSPACE,
    READS,
    Tool,
    ToolCall,
    object_schema,
)
from aimemory_site.onstart.selectors import briefing_get
from projects.scope import scope_of_call


def briefing(call: ToolCall) -> dict[str, Any]:
    return briefing_get(principal=call.principal, scope=scope_of_call(call))


ONSTART_TOOLS = (
    Tool(
        name="memory_briefing",
        description=(
            "Which project this session works in and how many messages wait in its inbox. "
            "Call it when you start work or are unsure which workspace and project to pass."
        ),
        input_schema=object_schema({"workspace": OWN_WORKSPACE, "project": OWN_PROJECT}),
        handler=briefing,
        annotations=READS,
    ),
)
