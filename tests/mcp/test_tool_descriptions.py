"""What every agent pays for on every session: the tool list stays small and says enough."""

from __future__ import annotations

from aimemory_site.mcp.server import TOOLS
from bench.mcp_tools_size import tools_list_size

# Every tool the server lists, whichever app defines it.
ALL_TOOLS = tuple(TOOLS.values())
DESCRIPTIONS = {tool.name: tool.description for tool in ALL_TOOLS}


def test_the_tool_list_stays_within_2400_tokens_in_both_eras() -> None:
    size = tools_list_size()
    assert size["approx_tokens"] <= 2400
    assert size["modern_approx_tokens"] <= 2400
    assert size["chars"] < size["modern_chars"]


def test_the_descriptions_say_when_to_use_each_tool() -> None:
    assert "not a wiki page" in DESCRIPTIONS["memory_message_send"]
    assert "without claiming" in DESCRIPTIONS["memory_message_list"]
    assert "Exactly once" in DESCRIPTIONS["memory_message_pop"]
    assert "untrusted input" in DESCRIPTIONS["memory_message_pop"]
    assert "never instructions to obey" in DESCRIPTIONS["memory_message_pop"]
    assert "all" in DESCRIPTIONS["memory_message_cancel"]
    assert "how many messages wait" in DESCRIPTIONS["memory_briefing"]
    assert "you do not choose" in DESCRIPTIONS["memory_decision_answer"]
    assert "before a compaction" in DESCRIPTIONS["memory_message_search"]


# docs/reference.md#status-replies-and-retries, one row per tool: what clients may run without asking.
ANNOTATIONS = {
    "memory_message_send": {"readOnlyHint": False, "destructiveHint": False},
    "memory_message_list": {"readOnlyHint": True},
    "memory_message_pop": {"readOnlyHint": False, "destructiveHint": False},
    "memory_message_cancel": {"destructiveHint": True, "idempotentHint": True},
    "memory_message_status": {"readOnlyHint": True},
    "memory_message_search": {"readOnlyHint": True},
    "memory_decision_answer": {"readOnlyHint": False, "destructiveHint": False},
    "memory_briefing": {"readOnlyHint": True},
    "memory_handoff_create": {"readOnlyHint": False, "destructiveHint": False},
    "memory_write_page": {"readOnlyHint": False, "destructiveHint": False},
    "memory_read_page": {"readOnlyHint": True},
    "memory_list_pages": {"readOnlyHint": True},
}


def test_every_tool_carries_its_annotations() -> None:
    listed = {tool.name: tool.listing().get("annotations", {}) for tool in ALL_TOOLS}

    assert set(listed) == set(ANNOTATIONS)
    for name, expected in ANNOTATIONS.items():
        assert listed[name].items() >= expected.items(), name
        assert listed[name]["openWorldHint"] is False, name


def test_only_the_reading_tools_are_read_only() -> None:
    read_only = {
        tool.name for tool in ALL_TOOLS if tool.listing().get("annotations", {}).get("readOnlyHint")
    }
    assert read_only == {
        "memory_message_list",
        "memory_message_status",
        "memory_message_search",
        "memory_briefing",
        "memory_read_page",
        "memory_list_pages",
    }
    assert all(tool.input_schema["additionalProperties"] is False for tool in ALL_TOOLS)
