"""The web home's cost in process: ``python -m bench.web_page`` (``DATABASE_URL`` for
PostgreSQL, a fresh database on that server).

Seeds what ``make bench`` seeds for its web rows (1,000 projects, 10,000 pending messages,
settled), then renders ``/web/`` through Django's handler, without gunicorn or a client,
and prints the median of 20 renders and the page's queries; with
``BENCH_WEB_SIGNED_IN=1`` as a signed-in superuser (whose home also lists the questions
waiting on them). ``make bench`` times the
page served; this isolates what the page itself costs, so two revisions can be compared
in one sitting. Not part of ``make bench``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import ROOT, SINKS, postgres_database

RENDERS = 20


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["AI_MEMORY_DATA_DIR"] = str(Path(tmp) / "data")
        if os.environ.get("DATABASE_URL", "").startswith("postgres"):
            with postgres_database() as url:
                assert url is not None
                os.environ["DATABASE_URL"] = url
                _measure()
        else:
            os.environ.pop("DATABASE_URL", None)
            _measure()


def _measure() -> None:
    def run(*arguments: str) -> None:
        subprocess.run(
            [sys.executable, *arguments], cwd=ROOT, check=True, stdout=subprocess.DEVNULL
        )

    run("manage.py", "migrate", "-v0")
    for arguments in (("projects", str(SINKS)), ("web", "1000", "9980"), ("settle",)):
        run("-m", "bench.seed", *arguments)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aimemory_site.settings")
    import django

    django.setup()
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_HOST="127.0.0.1")
    who = "anonymous"
    if os.environ.get("BENCH_WEB_SIGNED_IN"):
        # A signed-in viewer's home also lists the questions waiting on them.
        from django.contrib.auth.models import User

        client.force_login(User.objects.create_superuser("bench-admin", password="x"))
        who = "signed in"
    for _ in range(3):  # warm: templates compiled, connection open
        assert client.get("/web/").status_code == 200
    with CaptureQueriesContext(connection) as queries:
        page = client.get("/web/")
    # Read now: every request's start clears the connection's query log.
    query_count = len(queries.captured_queries)
    took = []
    for _ in range(RENDERS):
        started = time.perf_counter()
        client.get("/web/")
        took.append(time.perf_counter() - started)
    print(
        f"/web/ on {connection.vendor}, {who}: median {statistics.median(took) * 1000:.1f} ms of "
        f"{RENDERS} renders, {query_count} queries, {len(page.content):,} bytes"
    )
    connection.close()


if __name__ == "__main__":
    main()
