"""Template filters of the web mailbox."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils import dateformat, timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt

from aimemory_site.lib.ages import age_text

register = template.Library()


@register.simple_tag
def age(moment: datetime) -> SafeString:
    """``moment`` as a ``<time>``: its age as the text, the exact time as the tooltip.

    A tag, not an included template: the home page shows one per project card, and a
    thousand includes cost more than the rest of its render.
    """
    local = timezone.localtime(moment)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        dateformat.format(local, "c"),
        dateformat.format(local, "Y-m-d H:i T"),
        age_text(moment, timezone.now()),
    )


INBOX_BADGE_TITLE = "Messages from other projects waiting for an agent here"


@register.simple_tag
def inbox_badge(card: Mapping[str, Any]) -> SafeString:
    """A home card's amber ``N inbox`` badge (nothing when none waits), in the live region
    that ``static/webui/live.js`` refreshes (docs/operating.md#the-web-mailbox).

    The home page and its live fragment both render it here, so the two cannot differ. A
    tag, not an include, for the reason ``age`` gives; the wrapper, short as a thousand of
    them must be, has ``display: contents``, so it leaves the card's layout as it was.
    """
    badge = (
        format_html(
            '<span class="badge badge--inbox" title="{}">{} inbox</span>',
            INBOX_BADGE_TITLE,
            card["pending"],
        )
        if card["pending"]
        else ""
    )
    # Keyed by the project's names, which no other region's key can be (they hold a "/").
    return format_html(
        '<span data-live="{}/{}">{}</span>', card["workspace"], card["project"], badge
    )


@register.filter
def in_minutes(duration: timedelta) -> str:
    """``duration`` in whole minutes, rounded up so a wait is never understated."""
    minutes = max(1, math.ceil(duration.total_seconds() / 60))
    return f"{minutes} minute" if minutes == 1 else f"{minutes} minutes"


# Link and image targets a page may carry: relative ones, and these schemes only.
_LINK_SCHEMES = frozenset({"http", "https", "mailto"})
_SCHEME = re.compile(r"([a-z][a-z0-9+.-]*):")


class _PageMarkdown(MarkdownIt):
    """CommonMark (plus tables and strikethrough) with raw HTML off, so every ``<`` of a
    body is text, and links limited to ``_LINK_SCHEMES``: ``javascript:``, ``data:`` and
    every other scheme stay literal text rather than becoming a link or an image."""

    def __init__(self) -> None:
        super().__init__("commonmark", {"html": False})
        self.enable(["table", "strikethrough"])

    def validateLink(self, url: str) -> bool:  # markdown-it's name
        scheme = _SCHEME.match(url.strip().lower())
        return scheme is None or scheme.group(1) in _LINK_SCHEMES


_MARKDOWN = _PageMarkdown()


@register.filter
def markdown(body: str) -> SafeString:
    """``body`` rendered as Markdown. Safe to mark safe: raw HTML is disabled, so the
    renderer escapes all of the body's text and attributes itself. Headings move one level
    down (``#`` is an ``h2``): the page's own title is its ``h1``."""
    tokens = _MARKDOWN.parse(body)
    for token in tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = f"h{min(6, int(token.tag[1:]) + 1)}"
    rendered: str = _MARKDOWN.renderer.render(tokens, _MARKDOWN.options, {})
    return mark_safe(rendered)
