"""Which requests a browser marks as coming from another site's page
(docs/reference.md#the-on-start-block): ``Sec-Fetch-Site``, or without it the ``Origin``
and ``Referer`` compared as the request guard compares origins."""

from __future__ import annotations

import pytest
from django.test import RequestFactory
from pytest_django.fixtures import Settings as SettingsWrapper

from aimemory_site.lib.fetch_metadata import browser_marks_cross_site


@pytest.mark.parametrize(
    ("headers", "cross_site"),
    [
        ({}, False),
        ({"Sec-Fetch-Site": "same-origin"}, False),
        ({"Sec-Fetch-Site": "none"}, False),
        ({"Sec-Fetch-Site": "same-site"}, True),
        ({"Sec-Fetch-Site": "cross-site"}, True),
        ({"Origin": "http://testserver"}, False),
        ({"Origin": "https://evil.example"}, True),
        ({"Origin": "null"}, True),
        ({"Referer": "http://testserver/web/"}, False),
        ({"Referer": ""}, False),
        ({"Referer": "https://evil.example/page"}, True),
        ({"Referer": "http://testserver:8001/"}, True),
        ({"Referer": "http://[::1/"}, True),
        ({"Referer": "https://tools.example/a/b?c=d"}, False),
        ({"Origin": "http://testserver", "Referer": "https://evil.example/"}, True),
        ({"Sec-Fetch-Site": "same-origin", "Referer": "https://evil.example/"}, False),
    ],
)
def test_a_request_is_cross_site_by_fetch_metadata_or_else_by_origin_and_referer(
    settings: SettingsWrapper, headers: dict[str, str], cross_site: bool
) -> None:
    settings.AI_MEMORY_ALLOWED_ORIGINS = ["https://tools.example"]
    request = RequestFactory().get("/handoff", headers=headers)

    assert browser_marks_cross_site(request) is cross_site
