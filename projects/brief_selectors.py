"""The compiled brief of a project (docs/reference.md#the-on-start-block): what a session should know on
arrival, from the project's own pages, within a fixed budget."""

from __future__ import annotations

from aimemory_site.lib.decision_register import REGISTER_PREFIX, register_brief_line
from aimemory_site.lib.limits import BRIEF_MAX_CHARS
from projects.models import Page, Project
from projects.page_selectors import pages_of

BRIEF_POINTERS = 10
BRIEF_DECISIONS = 5
_INLINED_PREFIXES = ("_rules/", "_slots/")


def _group(page: Page) -> int | None:
    """Inlining order: pinned, then ``_rules/``, then ``_slots/``; None is never inlined.

    Only these are ever inlined, so a page another project wrote elsewhere as a report
    stays a pointer, never text in this project's sessions.
    """
    if page.pinned:
        return 0
    for rank, prefix in enumerate(_INLINED_PREFIXES, start=1):
        if page.path.startswith(prefix):
            return rank
    return None


def brief_compile(project: Project) -> str | None:
    """The brief of ``project`` (with its workspace loaded), or None when it has no pages.

    Two queries whatever the number of pages: every page's path, pin, date and length,
    then the bodies of the pages to inline and of the five newest pages of the decisions
    register (docs/reference.md#the-decisions-register), whose lines follow the inlined
    pages as ``Recent decisions:``. Those pages are pointed at like any other.
    """
    pages = list(pages_of(project))
    if not pages:
        return None
    inline = sorted(
        (page for page in pages if _group(page) is not None),
        key=lambda page: (_group(page), page.path),
    )
    decisions = sorted(
        (page for page in pages if page.path.startswith(REGISTER_PREFIX)),
        key=lambda page: (page.updated_at, page.path),
        reverse=True,
    )[:BRIEF_DECISIONS]
    bodies = dict(
        Page.objects.filter(pk__in=[page.pk for page in [*inline, *decisions]]).values_list(
            "pk", "body"
        )
    )
    header = f"📘 ai-memory brief for {project.workspace.name}/{project.name}:"
    parts, used = [header], len(header)
    overflow = []
    for page in inline:
        section = f"## {page.path}\n{bodies[page.pk]}"
        if used + 2 + len(section) <= BRIEF_MAX_CHARS:
            parts.append(section)
            used += 2 + len(section)
        else:
            overflow.append(page)  # does not fit: it becomes a pointer
    others = sorted(
        [page for page in pages if _group(page) is None] + overflow,
        key=lambda page: (page.updated_at, page.path),
        reverse=True,
    )
    # Room for the closing "(N more pages: ...)" line, whatever N is.
    reserve = len("\n\n(99999 more pages: memory_list_pages)")
    block = _decisions_block(
        [bodies[page.pk] for page in decisions], BRIEF_MAX_CHARS - used - reserve
    )
    if block is not None:
        parts.append(block)
        used += 2 + len(block)
    pointers: list[str] = []
    for page in others[:BRIEF_POINTERS]:
        pointer = f"{page.path} ({page.updated_at:%Y-%m-%d})"
        line = "Recent pages: " + ", ".join([*pointers, pointer])
        if used + 2 + len(line) + reserve > BRIEF_MAX_CHARS:
            break
        pointers.append(pointer)
    if pointers:
        line = "Recent pages: " + ", ".join(pointers)
        parts.append(line)
        used += 2 + len(line)
    more = len(others) - len(pointers)
    if more:
        parts.append(f"({more} more pages: memory_list_pages)")
    return "\n\n".join(parts)


def _decisions_block(bodies: list[str], room: int) -> str | None:
    """``Recent decisions:`` and a line for each register page of ``bodies`` (newest
    first) that is in the register's form, as many as fit in ``room`` chars with the
    blank line before the block; None when none does."""
    heading = "Recent decisions:"
    lines: list[str] = []
    for body in bodies:
        line = register_brief_line(body)
        if line is None:
            continue  # a page someone else wrote at a register path
        if 2 + len("\n".join([heading, *lines, line])) > room:
            break
        lines.append(line)
    return "\n".join([heading, *lines]) if lines else None
