"""One operator decision that the surface tests send and read back: its question, the body
the writer makes of it, and the decision every list and pop row must carry."""

from __future__ import annotations

from typing import Any

from aimemory_site.lib.decisions import decision_body_write, decision_subject

MERGE_QUESTION = "Merge the export branch?"
MERGE_SUBJECT = decision_subject(MERGE_QUESTION)
MERGE_BODY = decision_body_write(
    MERGE_QUESTION,
    [{"id": "merge", "label": "Merge: now", "recommended": True}, {"id": "wait"}],
    requires_root=True,
    reply_project="default/project-a",
)
# What the parser reads back: the options' defaults filled in.
MERGE_DECISION: dict[str, Any] = {
    "question": MERGE_QUESTION,
    "requires_root": True,
    "reply_project": "default/project-a",
    "options": [
        {"id": "merge", "label": "Merge: now", "description": None, "recommended": True},
        {"id": "wait", "label": "wait", "description": None, "recommended": False},
    ],
    "details": None,
    "links": [],
}
