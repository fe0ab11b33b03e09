"""``ai-memory manage project_mode WS/PROJ open|restricted``: who may use a project."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from projects.management.commands._lookups import project_named
from projects.models import Project
from projects.services import project_mode_set


class Command(BaseCommand):
    help = (
        "Make a project open (every authenticated user reads and writes) or restricted "
        "(root, its creator and grant holders). Example: ai-memory manage project_mode acme/x restricted"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("project", metavar="WS/PROJ")
        parser.add_argument("mode", choices=list(Project.AccessMode.values))

    def handle(self, *args: Any, **options: Any) -> None:
        project = project_named(options["project"])
        project_mode_set(project=project, mode=options["mode"])
        self.stdout.write(f"{project}: {options['mode']}")
