"""Pages on the web: the project page's **Pages** list and the read-only page view."""

from __future__ import annotations

import re

import pytest
from django.http import HttpResponse
from django.test import Client

from aimemory_site.lib.principal import Principal
from projects.models import Page, Project
from projects.page_services import page_write
from tests.conftest import Persona, make_project
from tests.webui.conftest import (
    cards,
    deliver,
    element,
    page,
    section,
    text_of,
    without_csrf_token,
)

B_PAGE = "/web/w/default/project-b/"
B_PAGES = "/web/w/default/project-b/pages/"
NO_PAGES = "Pages No pages yet."
NO_SUCH_PAGE = "No such page There is no page at this path in a project you can read."


@pytest.fixture
def project_b(db: None) -> Project:
    make_project(None, "default", "project-a")
    return make_project(None, "default", "project-b")


def write(path: str, body: str = "Some notes.", *, pinned: bool = False) -> None:
    """Write a page of default/project-b as root would."""
    page_write(
        principal=Principal.root(),
        workspace="default",
        project="project-b",
        path=path,
        body=body,
        pinned=pinned,
    )


def pages_of(client: Client, path: str = B_PAGE) -> str:
    return section(page(client, path), "pages-heading")


def get(client: Client, path: str) -> HttpResponse:
    response = client.get(path)
    assert isinstance(response, HttpResponse)
    return response


# The project page's list


def test_pages_are_listed_pinned_first_then_by_path(client: Client, project_b: Project) -> None:
    for path, pinned in [
        ("zeta", True),
        ("notes/beta", False),
        ("alpha", False),
        ("beta", True),
        ("notes/alpha", False),
    ]:
        write(path, "x" * 12, pinned=pinned)
    listing = pages_of(client)
    links = re.findall(r'<a class="pages__path" href="([^"]+)">([^<]+)</a>', listing)
    assert links == [
        (f"{B_PAGES}beta", "beta"),
        (f"{B_PAGES}zeta", "zeta"),
        (f"{B_PAGES}alpha", "alpha"),
        (f"{B_PAGES}notes/alpha", "notes/alpha"),
        (f"{B_PAGES}notes/beta", "notes/beta"),
    ]
    assert text_of(listing) == (
        "Pages 5 pages"
        " beta pinned 12 chars · updated just now"
        " zeta pinned 12 chars · updated just now"
        " alpha 12 chars · updated just now"
        " notes/alpha 12 chars · updated just now"
        " notes/beta 12 chars · updated just now"
    )
    assert listing.count("badge--pinned") == 2
    assert "x" * 12 not in listing  # never a body


def test_pages_sit_between_the_mailbox_and_recent_activity(
    client: Client, project_b: Project
) -> None:
    html = page(client, B_PAGE)
    mailbox = html.index('id="mailbox-heading"')
    pages = html.index('<section class="panel panel--pages" aria-labelledby="pages-heading">')
    activity = html.index('id="activity-heading"')
    assert mailbox < pages < activity
    assert 'id="pages-heading">Pages</h2>' in html


def test_no_pages_says_so(client: Client, project_b: Project) -> None:
    assert text_of(pages_of(client)) == NO_PAGES


@pytest.mark.parametrize(
    "path", ["/web/w/", "/web/w/default/", "/web/w/default/nothing/", "/web/w/default/PROJECT-B/"]
)
def test_a_url_naming_no_existing_project_lists_no_pages(
    client: Client, project_b: Project, path: str
) -> None:
    write("plan")
    assert text_of(pages_of(client, path)) == NO_PAGES


def test_a_long_list_stops_at_200_and_points_to_the_cli(client: Client, project_b: Project) -> None:
    Page.objects.bulk_create(
        Page(project=project_b, path=f"p{n:03}", body="b", pinned=n == 250) for n in range(260)
    )
    listing = pages_of(client)
    assert listing.count('class="pages__entry"') == 200
    assert text_of(element(listing, "pages-count")) == "200+ pages"
    assert f'href="{B_PAGES}p250"' in listing  # the pinned one comes first
    assert f'href="{B_PAGES}p198"' in listing
    assert f'href="{B_PAGES}p199"' not in listing
    assert (
        "<code>ai-memory page list --workspace default --project project-b --prefix PREFIX</code>"
        in listing
    )


def test_the_list_of_an_unreadable_project_is_empty(
    client: Client, charlie: Persona, bob: Persona, alices_restricted: Project
) -> None:
    Page.objects.create(project=alices_restricted, path="secret-plan", body="restricted")
    client.force_login(charlie.user)
    html = page(client, "/web/w/default/alpha/")
    assert text_of(section(html, "pages-heading")) == NO_PAGES
    assert "secret-plan" not in html
    client.force_login(bob.user)  # bob reads alpha
    assert "secret-plan" in pages_of(client, "/web/w/default/alpha/")


# The page view

MARKDOWN = """# Release plan

Ship the **export** endpoint.

- first step
- second step

```python
print("<b>bold?</b>")
```

| field | type |
|-------|------|
| id    | uuid |

See [the notes](notes/more) and [the docs](https://example.com/docs).
"""


def test_the_page_view_renders_markdown(client: Client, project_b: Project) -> None:
    Page.objects.create(
        project=project_b,
        path="plans/release",
        body=MARKDOWN,
        pinned=True,
        updated_by_agent="claude-code",
        updated_by_user="alice",
    )
    html = page(client, f"{B_PAGES}plans/release")
    assert "<title>plans/release · default/project-b · ai-memory</title>" in html
    assert '<h1 class="page-title page-title--path">plans/release</h1>' in html
    body = element(html, "page-body")
    # Headings move one level down under the page's own h1.
    assert "<h2>Release plan</h2>" in body
    assert "<p>Ship the <strong>export</strong> endpoint.</p>" in body
    assert "<ul>\n<li>first step</li>\n<li>second step</li>\n</ul>" in body
    assert (
        '<pre><code class="language-python">'
        "print(&quot;&lt;b&gt;bold?&lt;/b&gt;&quot;)\n</code></pre>" in body
    )
    assert "<th>field</th>" in body and "<td>uuid</td>" in body
    assert '<a href="notes/more">the notes</a>' in body
    assert '<a href="https://example.com/docs">the docs</a>' in body
    meta = element(html, "page-meta")
    assert text_of(meta) == "pinned Updated just now by agent claude-code user alice"
    breadcrumb = re.search(r'<nav class="breadcrumb".*?</nav>', html, re.S)
    assert breadcrumb is not None
    assert text_of(breadcrumb.group(0)) == "Projects default project-b plans/release"
    assert f'<a href="{B_PAGE}">project-b</a>' in breadcrumb.group(0)


def test_the_page_view_escapes_raw_html(client: Client, project_b: Project) -> None:
    write(
        "hostile",
        "# Title\n\n<script>alert(1)</script>\n\n<img src=x onerror=alert(1)>\n\n"
        'inline <b onclick="alert(1)">bold</b> and <iframe src="https://example.com"></iframe>',
    )
    html = page(client, f"{B_PAGES}hostile")
    body = element(html, "page-body")
    for tag in ("<script", "<img", "<b ", "<iframe"):
        assert tag not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "&lt;img src=x onerror=alert(1)&gt;" in body
    assert "&lt;b onclick=&quot;alert(1)&quot;&gt;bold&lt;/b&gt;" in body
    assert "<script>alert(1)</script> <img src=x onerror=alert(1)>" in text_of(body)


@pytest.mark.parametrize(
    "link",
    [
        "[x](javascript:alert(1))",
        "[x](JavaScript:alert(1))",
        "[x](&#106;avascript:alert(1))",
        "[x](vbscript:msgbox(1))",
        "[x](data:text/html;base64,PHNjcmlwdD4=)",
        "[x](data:image/png;base64,AAAA)",
        "![x](data:image/png;base64,AAAA)",
        "<javascript:alert(1)>",
        "[x][ref]\n\n[ref]: javascript:alert(1)",
    ],
)
def test_a_link_with_a_dangerous_scheme_stays_text(
    client: Client, project_b: Project, link: str
) -> None:
    write("links", f"before {link} after")
    body = element(page(client, f"{B_PAGES}links"), "page-body")
    assert "<a " not in body
    assert "<img" not in body
    assert not re.search(r'(href|src)="', body)
    assert "before" in text_of(body) and "after" in text_of(body)


def test_the_page_view_is_read_only(client: Client, project_b: Project) -> None:
    write("plan")
    html = page(client, f"{B_PAGES}plan")
    assert "<form" not in html.replace('<form class="site-nav__logout"', "")
    assert "<button" not in html
    for method in ("post", "put", "delete"):
        response = getattr(Client(enforce_csrf_checks=True), method)(f"{B_PAGES}plan")
        assert response.status_code == 405
        assert response["Allow"] == "GET"
    assert Page.objects.get(path="plan").body == "Some notes."


@pytest.mark.parametrize(
    "path",
    [
        f"{B_PAGES}nothing-here",
        f"{B_PAGES}PLAN",  # paths match exactly
        f"{B_PAGES}plan/",
        f"{B_PAGES}../plan",
        "/web/w/default/nothing/pages/plan",
        "/web/w/nowhere/project-b/pages/plan",
    ],
)
def test_a_missing_page_is_a_404_page(client: Client, project_b: Project, path: str) -> None:
    write("plan", "the plan body")
    response = get(client, path)
    assert response.status_code == 404
    html = response.content.decode()
    assert NO_SUCH_PAGE in text_of(html)
    assert "the plan body" not in html


def test_an_unreadable_project_s_page_looks_like_a_missing_page(
    client: Client, alice: Persona, bob: Persona, charlie: Persona, alices_restricted: Project
) -> None:
    Page.objects.create(project=alices_restricted, path="plan", body="# restricted plan")
    url = "/web/w/default/alpha/pages/plan"
    client.force_login(bob.user)  # bob reads alpha
    assert "restricted plan" in page(client, url)

    client.force_login(charlie.user)
    unreadable = get(client, url)
    Project.objects.filter(pk=alices_restricted.pk).delete()
    missing_project = get(client, url)
    make_project(alice, "default", "alpha")  # open again, but without the page
    missing_page = get(client, url)
    assert unreadable.status_code == missing_project.status_code == missing_page.status_code
    assert unreadable.status_code == 404
    shown = {
        without_csrf_token(response.content.decode())
        for response in (unreadable, missing_project, missing_page)
    }
    assert len(shown) == 1
    assert "restricted plan" not in unreadable.content.decode()


def test_with_auth_on_a_visitor_is_sent_to_the_login_page(
    client: Client, auth_on: str, project_b: Project
) -> None:
    write("plan")
    response = get(client, f"{B_PAGES}plan")
    assert response.status_code == 302
    assert response["Location"] == f"/accounts/login/?next={B_PAGES}plan"


# A page is never mail


def test_writing_pages_changes_no_badge_and_no_mailbox(client: Client, project_b: Project) -> None:
    write("plan", pinned=True)
    write("notes/today")
    home = page(client, "/web/")
    assert "badge--inbox" not in home
    assert 'id="inbox-summary"' not in home
    assert "inbox" not in text_of(cards(home)["default/project-b"])
    html = page(client, B_PAGE)
    assert (
        text_of(section(html, "mailbox-heading")) == "Mailbox No pending messages for this project."
    )
    assert 'id="mailbox-count"' not in html

    deliver("default/project-b", "default/project-a", subject="one request")
    write("plan", "rewritten", pinned=True)
    write("notes/tomorrow")
    home = page(client, "/web/")
    assert "1 inbox" in text_of(cards(home)["default/project-b"])
    assert text_of(element(home, "inbox-summary")) == (
        "✉ 1 message waiting for agents in default/project-b (1)."
    )
    html = page(client, B_PAGE)
    mailbox = section(html, "mailbox-heading")
    assert text_of(element(mailbox, "mailbox-count")) == "1 pending"
    assert mailbox.count('class="message"') == 1
    assert "plan" not in text_of(mailbox)
    assert text_of(element(section(html, "pages-heading"), "pages-count")) == "3 pages"
