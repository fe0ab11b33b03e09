"""A first ``migrate`` on a data dir that does not exist yet makes it, also when the
secret key comes from the environment (so the settings never wrote a key file there)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

MIGRATE = """
import django
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
"""


@pytest.mark.slow
def test_migrate_with_a_given_secret_key_makes_the_data_dir(tmp_path: Path) -> None:
    data_dir = tmp_path / "not-yet" / "data"
    env = {
        name: value
        for name, value in os.environ.items()
        if name != "DATABASE_URL" and not name.startswith("AI_MEMORY_")
    }
    env |= {
        "DJANGO_SETTINGS_MODULE": "aimemory_site.settings",
        "AI_MEMORY_DATA_DIR": str(data_dir),
        "SECRET_KEY": "a-secret-key-from-the-environment-" + "x" * 30,
    }

    done = subprocess.run(
        [sys.executable, "-c", MIGRATE], cwd=ROOT, env=env, capture_output=True, text=True
    )

    assert done.returncode == 0, done.stderr
    assert (data_dir / "ai-memory.sqlite3").is_file()
