"""The wheel installs and serves anywhere: built from the checkout, installed into a fresh
virtualenv outside it (as pipx would), and served from an unrelated directory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.servers import free_port, wait_healthy

REPO_ROOT = Path(__file__).resolve().parents[1]
INSTALL_TIMEOUT_SECONDS = 600


def _run(*command: str | Path, cwd: Path) -> None:
    done = subprocess.run(
        [str(part) for part in command],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=INSTALL_TIMEOUT_SECONDS,
        check=False,
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read().decode("utf-8", errors="replace")


@pytest.mark.slow
@pytest.mark.skipif(
    bool(os.environ.get("DATABASE_URL")),
    reason="the installed server runs on its own SQLite whatever the run's database: the "
    "run without DATABASE_URL checks it",
)
def test_installed_wheel_serves_the_web_mailbox_and_the_api_docs(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    _run(
        sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, REPO_ROOT, cwd=tmp_path
    )
    [wheel] = dist.glob("ai_memory_server-*.whl")

    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    _run(venv / "bin" / "python", "-m", "pip", "install", "-q", wheel, cwd=tmp_path)

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key
        not in ("DATABASE_URL", "AI_MEMORY_ROOT_TOKEN", "PYTHONPATH", "DJANGO_SETTINGS_MODULE")
    }
    env["AI_MEMORY_DATA_DIR"] = str(tmp_path / "data")
    proc = subprocess.Popen(
        [str(venv / "bin" / "ai-memory"), "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=elsewhere,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        assert wait_healthy(f"{base}/healthz", proc) == 200

        status, home = _get(f"{base}/web/")
        assert status == 200
        [stylesheet] = re.findall(r'href="(/static/[^"]+\.css)"', home)
        assert _get(base + stylesheet)[0] == 200

        status, docs = _get(f"{base}/api/v1/docs")
        assert status == 200
        assert "cdn" not in docs.lower()
        scripts = re.findall(r'src="(/static/[^"]+\.js)"', docs)
        assert scripts, "the docs page loads Swagger UI from this server"
        for script in scripts:
            assert _get(base + script)[0] == 200
    finally:
        proc.terminate()
        output = proc.communicate(timeout=30)[0].decode()
    # Served from the installed package, never from the checkout.
    assert str(REPO_ROOT) not in output
