"""The compiled brief of a project (docs/reference.md#the-on-start-block): what a session should know on
arrival, from the project's own pages, within a fixed budget."""

from __future__ import annotations

from aimemory_site.lib.limits import BRIEF_MAX_CHARS
from projects.models import Page, Project
from projects.page_selectors import pages_of

BRIEF_POINTERS = 10
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
    then the bodies of the pages to inline.
    """
    pages = list(pages_of(project))
    if not pages:
        return None
    inline = sorted(
        (page for page in pages if _group(page) is not None),
        key=lambda page: (_group(page), page.path),
    )
    bodies = dict(
        Page.objects.filter(pk__in=[page.pk for page in inline]).values_list("pk", "body")
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
