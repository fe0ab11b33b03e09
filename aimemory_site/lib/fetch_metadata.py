"""What a browser says about where a request came from: the ``Sec-Fetch-Site`` header,
or, from a browser that sends none, the ``Origin`` and ``Referer`` headers.

A browser sends no ``Origin`` with a plain GET such as an ``<img src=...>``, so the
Origin rule cannot stop a web page from making one; ``Sec-Fetch-Site`` says it is not
the server's own page, and, where a browser leaves it out, the page's ``Referer`` does.
Agents, hooks and scripts send none of them.
"""

from __future__ import annotations

from django.http import HttpRequest

from aimemory_site.lib.origin import origin_allowed, page_ours

# same-origin: this server's own page; none: the user typed the URL or opened a bookmark.
_NOT_CROSS_SITE = frozenset({"same-origin", "none"})


def browser_marks_cross_site(request: HttpRequest) -> bool:
    """True when ``Sec-Fetch-Site`` is present and neither ``same-origin`` nor ``none``;
    without it, when the ``Origin`` or the ``Referer`` names another origin than the
    server's own or one of ``AI_MEMORY_ALLOWED_ORIGINS`` (the request guard's rule,
    ``lib.origin``).

    ``same-site`` counts as cross-site: a page on another port of the same host is
    same-site to a browser, and such a page may run anyone's script. A browser that
    sends no fetch metadata (an older one, or one told to strip it) still names the
    page an ``<img>`` was on in ``Referer``, unless a referrer policy hides it.
    """
    # META, not request.headers: building the headers mapping costs more than this rule.
    meta = request.META
    value: str | None = meta.get("HTTP_SEC_FETCH_SITE")
    if value is not None:
        return value.strip().lower() not in _NOT_CROSS_SITE
    if not origin_allowed(request):
        return True
    referer: str = meta.get("HTTP_REFERER", "")
    return bool(referer.strip()) and not page_ours(request, referer)
