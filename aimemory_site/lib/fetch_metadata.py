"""What a browser says about where a request came from (the ``Sec-Fetch-Site`` header).

A browser sends no ``Origin`` with a plain GET such as an ``<img src=...>``, so the
Origin rule cannot stop a web page from making one; ``Sec-Fetch-Site`` says it is not
the server's own page. Agents, hooks and scripts never send the header.
"""

from __future__ import annotations

from django.http import HttpRequest

# same-origin: this server's own page; none: the user typed the URL or opened a bookmark.
_NOT_CROSS_SITE = frozenset({"same-origin", "none"})


def browser_marks_cross_site(request: HttpRequest) -> bool:
    """True when ``Sec-Fetch-Site`` is present and neither ``same-origin`` nor ``none``.

    ``same-site`` counts as cross-site: a page on another port of the same host is
    same-site to a browser, and such a page may run anyone's script.
    """
    # META, not request.headers: building the headers mapping costs more than this rule.
    value: str | None = request.META.get("HTTP_SEC_FETCH_SITE")
    return value is not None and value.strip().lower() not in _NOT_CROSS_SITE
