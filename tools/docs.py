"""Write the generated tables of ``docs/reference.md`` from the code itself.

``make docs`` runs ``python -m tools.docs``; ``--check`` only says whether the file is
stale (exit 1), which is what ``tests/test_docs.py`` asserts. Each table is read from the
place the server itself reads it:

- MCP tools: the server's own ``tools/list`` answer, asked in process;
- routes and shapes: the OpenAPI schema of the django-ninja APIs;
- error codes: the ``Code`` enum of ``aimemory_site.lib.errors``;
- CLI commands: the argparse tree of ``aimemory_site.cli.main.build_parser``;
- environment variables: ``aimemory_site.lib.environment``, which the settings read
  through.

The prose between the blocks is written by hand. A block is the text between
``<!-- generated: NAME -->`` and ``<!-- end generated -->``; the output depends on the
code alone (no time, no environment, no dictionary order), so a second run changes
nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).resolve().parent.parent / "docs" / "reference.md"

_BLOCK = re.compile(
    r"(?P<open><!-- generated: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)(?P<close><!-- end generated -->)",
    re.DOTALL,
)

# What each error code means; its HTTP status is the code's own (lib/errors.py). The enum
# is the list: a code without a line here stops the generator, so a new code cannot go
# undocumented, and so does a line for a code the enum no longer has.
ERROR_CODES: dict[str, str] = {
    "bad_request": "the request cannot be used; also an unparsable header",
    "unauthorized": "authentication is on and the bearer is missing, unknown or revoked",
    "forbidden": "the caller may not do this",
    "not_found": "no such route",
    "conflict": "the request conflicts with the current state",
    "payload_too_large": "the request body is over 1 MiB",
    "request_timeout": "the body stopped arriving for `AI_MEMORY_CLIENT_TIMEOUT` seconds",
    "validation_error": "the body or query does not match the route's schema",
    "method_not_allowed": "the route does not take this method",
    "server_error": "an error of the server's own; the log has the details",
    "database_unavailable": "the database did not answer in time, or refused",
    "rate_limited": "over `AI_MEMORY_RATE_LIMIT`; `Retry-After` says when to retry",
    "too_many_waits": (
        "a call with `wait_seconds` past `AI_MEMORY_MAX_WAITS_PER_CALLER` or "
        "`AI_MEMORY_MAX_WAITS`; nothing done; `Retry-After` says when to retry"
    ),
    "bad_host": "the `Host` header is not in `ALLOWED_HOSTS`",
    "origin_not_allowed": (
        "a browser `Origin` that is neither the server's own nor in `AI_MEMORY_ALLOWED_ORIGINS`"
    ),
    "unsupported_media_type": "a request body that is not `application/json`",
    "invalid_text": (
        "a body, path or query that is not UTF-8, or a NUL or a lone surrogate anywhere in "
        "the request"
    ),
    "invalid_arguments": "MCP: a tool's arguments are missing or of the wrong type",
    "request_line_too_long": "a request line over 4094 bytes",
    "headers_too_large": "request headers too large",
    "oauth_not_offered": "`/.well-known/oauth-*`: the server offers no OAuth",
    "invalid_name": "a workspace or project name outside 1-100 chars of `[A-Za-z0-9._-]`",
    "project_not_found": "no such project, or one the caller may not read",
    "write_access_required": "the caller may read the project but not write it",
    "invalid_session_id": "a `session_id` outside 1-200 characters",
    "session_taken": "the session id was registered by another principal",
    "session_not_found": (
        "a session wait for a session id the caller did not register (unknown or another's)"
    ),
    "invalid_source": (
        "a session start's `source` other than `startup`, `resume`, `clear`, `compact`, `init`"
    ),
    "scope_incomplete": "only one of workspace and project was named",
    "scope_not_named": (
        "MCP: pop, cancel, send, a handoff, a page write or a decision answer on a scope the "
        "server only inferred"
    ),
    "empty_body": "a message, handoff or page without a body",
    "invalid_box": '`box` other than "inbox" or "outbox" (search: or "all")',
    "invalid_query": "a search query over 500 characters",
    "invalid_message_id": "a `message_id` that is not a message id",
    "cancel_target": "cancel without exactly one of `message_id` and `all: true`",
    "inbox_full": "the recipient's inbox already holds 256 pending messages",
    "message_not_found": "no such message for this caller's project",
    "invalid_in_reply_to": "`in_reply_to` names no message sent or received by the sending project",
    "invalid_idempotency_key": "an `idempotency_key` outside 1-200 characters",
    "invalid_request_id": "a `request_id` outside 1-200 characters",
    "invalid_expiry": (
        "an `expires_in_seconds` that is not a whole number of seconds in 60..2,592,000 "
        "(1 minute to 30 days)"
    ),
    "invalid_wait_seconds": "a `wait_seconds` that is not an integer",
    "admission_refused": "a deciding admission webhook refused the operation",
    "invalid_page_path": "a page path that breaks the path rules",
    "page_not_found": "no page at that path",
    "not_a_pending_decision": "answer page: the message is not a pending question",
    "unknown_option": "answer page: the question offers no such option",
    "invalid_decision": (
        "a question whose deadline is under 60 s or over 30 days away or does not parse, "
        "or whose on_deadline it does not offer"
    ),
    "reply_project_not_found": (
        "answer page: the question's `reply_project` is missing, unknown or not the asker"
    ),
    "root_required": "answer page: a `requires_root` question, answered by non-root",
    "anonymous_answers_off": (
        "answer page: an anonymous server without `AI_MEMORY_ALLOW_ANONYMOUS_ANSWERS=1`"
    ),
    "decision_already_answered": "answer page: the question already has an answer",
    "invalid_request_state": (
        "MCP `memory_decision_answer`: a `requestState` altered, expired (10 minutes), "
        "issued to another caller or for another question, or already used; nothing sent"
    ),
}


def _django_setup() -> None:
    """Load Django with settings that read nothing of the user's and write nothing."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aimemory_site.settings")
    # Without them the settings would generate a secret key into ./var.
    os.environ.setdefault("SECRET_KEY", "docs-generation-only")
    os.environ.setdefault("AI_MEMORY_DATA_DIR", tempfile.mkdtemp(prefix="ai-memory-docs-"))
    import django

    django.setup()


def _prose(text: str) -> str:
    """A docstring as Markdown: paragraphs on one line each, reST's ``code`` as `code`."""
    paragraphs = [" ".join(part.split()) for part in re.split(r"\n\s*\n", text.strip())]
    return "\n\n".join(paragraphs).replace("``", "`")


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


# MCP tools ----------------------------------------------------------------------------


def mcp_tools() -> list[dict[str, Any]]:
    """The server's ``tools/list`` answer, asked as a client would, in process."""
    _django_setup()
    from aimemory_site.lib.principal import Principal
    from aimemory_site.mcp.server import handle_body

    request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    reply = handle_body(json.dumps(request).encode(), headers={}, principal=Principal.anonymous())
    assert reply.body is not None
    tools: list[dict[str, Any]] = reply.body["result"]["tools"]
    return tools


def _schema_type(schema: Mapping[str, Any]) -> str:
    if "$ref" in schema:
        name = str(schema["$ref"]).rsplit("/", 1)[-1]
        return f"[`{name}`](#{name.lower()})"
    if "anyOf" in schema:
        return " | ".join(_schema_type(option) for option in schema["anyOf"])
    if "enum" in schema:
        return " | ".join(f'`"{value}"`' for value in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        return f"list of {_schema_type(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema and not schema.get("properties"):
        values = schema["additionalProperties"]
        return f"object of {_schema_type(values)}" if isinstance(values, dict) else "object"
    return str(kind)


def _constraints(schema: Mapping[str, Any]) -> str:
    parts = []
    for key, label in (
        ("minLength", "min length"),
        ("maxLength", "max length"),
        ("minimum", "min"),
        ("maximum", "max"),
    ):
        if key in schema:
            parts.append(f"{label} {schema[key]}")
    if "default" in schema:
        parts.append(f"default `{json.dumps(schema['default'])}`")
    return "; ".join(parts)


def _field_rows(schema: Mapping[str, Any]) -> list[tuple[str, ...]]:
    required = set(schema.get("required", []))
    rows: list[tuple[str, ...]] = []
    for name, field in schema.get("properties", {}).items():
        description = _prose(field.get("description", ""))
        extra = _constraints(field)
        rows.append(
            (
                f"`{name}`",
                _schema_type(field),
                "yes" if name in required else "no",
                "; ".join(part for part in (description, extra) if part),
            )
        )
    return rows


def tools_block() -> str:
    tools = mcp_tools()
    names = [f"`{tool['name']}`" for tool in tools]
    out = [f"{len(names)} tools: {', '.join(names)}.\n"]
    for tool in tools:
        out.append(f"\n### `{tool['name']}`\n\n{_prose(tool['description'])}\n\n")
        hints = tool.get("annotations", {})
        if hints:
            flags = ", ".join(f"`{key}: {json.dumps(value)}`" for key, value in hints.items())
            out.append(f"Annotations: {flags}.\n\n")
        rows = _field_rows(tool["inputSchema"])
        if rows:
            out.append(_table(("argument", "type", "required", "meaning"), rows))
        else:
            out.append("No arguments.\n")
    return "".join(out)


# REST routes and shapes ----------------------------------------------------------------


def openapi_schemas() -> list[dict[str, Any]]:
    """The OpenAPI documents of the JSON API and of the lifecycle-hook route."""
    _django_setup()
    from aimemory_site.api import api, hooks_api

    return [dict(api.get_openapi_schema()), dict(hooks_api.get_openapi_schema())]


def _operations() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for document in openapi_schemas():
        for path, operations in document["paths"].items():
            for method, operation in operations.items():
                yield method.upper(), path, operation


def routes_block() -> str:
    out = []
    for method, path, operation in _operations():
        out.append(f"\n#### `{method} {path}`\n\n")
        if operation.get("description"):
            out.append(f"{_prose(operation['description'])}\n\n")
        parameters = [
            (
                f"`{parameter['name']}`",
                parameter["in"],
                _schema_type(parameter.get("schema", {})),
                "yes" if parameter.get("required") else "no",
                "; ".join(
                    part
                    for part in (
                        parameter.get("description", ""),
                        _constraints(parameter.get("schema", {})),
                    )
                    if part
                ),
            )
            for parameter in operation.get("parameters", [])
        ]
        if parameters:
            out.append(_table(("parameter", "in", "type", "required", "meaning"), parameters))
            out.append("\n")
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if body:
            out.append(f"Body: {_schema_type(body['schema'])}.\n\n")
        # Statuses that share a shape (every error shares one) are named together.
        by_shape: dict[str, list[str]] = {}
        responses = operation.get("responses", {})
        for status in sorted(responses, key=int):
            content = responses[status].get("content", {}).get("application/json")
            shape = _schema_type(content["schema"]) if content else "no body"
            by_shape.setdefault(shape, []).append(str(status))
        answers = [f"{', '.join(statuses)} {shape}" for shape, statuses in by_shape.items()]
        out.append("Answers: " + "; ".join(answers) + ".\n")
    return "".join(out)


def shapes_block() -> str:
    components: dict[str, Any] = {}
    for document in openapi_schemas():
        components.update(document.get("components", {}).get("schemas", {}))
    out = []
    for name in sorted(components):
        schema = components[name]
        out.append(f"\n#### `{name}`\n\n")
        if schema.get("description"):
            out.append(f"{_prose(schema['description'])}\n\n")
        rows = _field_rows(schema)
        if rows:
            out.append(_table(("field", "type", "required", "meaning"), rows))
        else:
            out.append("No fields.\n")
    return "".join(out)


# Error codes ---------------------------------------------------------------------------


def errors_block() -> str:
    from aimemory_site.lib.errors import Code

    missing = [code.value for code in Code if code.value not in ERROR_CODES]
    if missing:
        raise SystemExit(f"tools/docs.py: no ERROR_CODES line for {', '.join(missing)}")
    gone = sorted(set(ERROR_CODES) - {code.value for code in Code})
    if gone:
        raise SystemExit(
            f"tools/docs.py: ERROR_CODES names codes the enum lacks: {', '.join(gone)}"
        )
    rows = [(f"`{code.value}`", str(code.status), ERROR_CODES[code.value]) for code in Code]
    return _table(("code", "HTTP status", "when"), rows)


# CLI -----------------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _summaries(parser: argparse.ArgumentParser) -> dict[str, str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return {choice.dest: choice.help or "" for choice in action._choices_actions}
    return {}


def _usage(parser: argparse.ArgumentParser) -> str:
    usage = " ".join(parser.format_usage().split())
    return usage.removeprefix("usage: ")


def _options(parser: argparse.ArgumentParser) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        if action.help == argparse.SUPPRESS:
            continue
        name = ", ".join(action.option_strings) or (action.metavar or action.dest)
        rows.append((f"`{name}`", action.help or ""))
    return rows


def _cli_commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...], summary: str
) -> Iterator[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    children = _subcommands(parser)
    if not children:
        yield path, summary, parser
        return
    summaries = _summaries(parser)
    for name, child in children.items():
        yield from _cli_commands(child, (*path, name), summaries.get(name, ""))


@contextlib.contextmanager
def _terminal_width(columns: int) -> Iterator[None]:
    """argparse formats usage to the terminal's width: fix it while the block is written,
    so the output does not depend on who runs the generator."""
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(columns)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def cli_block() -> str:
    with _terminal_width(200):
        return _cli_block()


def _cli_block() -> str:
    from aimemory_site.cli.main import build_parser

    root = build_parser()
    commands = list(_cli_commands(root, ("ai-memory",), ""))
    out = [
        _table(
            ("command", "does"),
            [
                (f"[`{' '.join(path)}`](#{'-'.join(path)})", summary)
                for path, summary, _ in commands
            ],
        )
    ]
    for path, summary, parser in commands:
        out.append(f"\n### {' '.join(path)}\n\n")
        if summary:
            out.append(f"{summary[0].upper()}{summary[1:].rstrip('.')}.\n\n")
        out.append(f"```\n{_usage(parser)}\n```\n\n")
        rows = _options(parser)
        if rows:
            out.append(_table(("argument", "meaning"), rows))
    return "".join(out)


# Environment ---------------------------------------------------------------------------


def environment_block() -> str:
    from aimemory_site.lib.environment import ENVIRONMENT

    rows = [
        (f"`{variable.name}`", variable.reader.value, variable.meaning, variable.default)
        for variable in ENVIRONMENT
    ]
    return _table(("variable", "read by", "meaning", "default"), rows)


# Links --------------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(?P<title>.+?)\s*#*\s*$")
_FENCE = re.compile(r"^(```|~~~)")


def heading_anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of ``markdown``: lower case, punctuation
    dropped, spaces as hyphens, a repeated one suffixed ``-1``, ``-2``..."""
    anchors: set[str] = set()
    counts: dict[str, int] = {}
    in_fence = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        match = None if in_fence else _HEADING.match(line)
        if match is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", match["title"].lower()).replace(" ", "-")
        seen = counts.get(slug, 0)
        counts[slug] = seen + 1
        anchors.add(slug if seen == 0 else f"{slug}-{seen}")
    return anchors


GENERATORS: dict[str, Callable[[], str]] = {
    "tools": tools_block,
    "routes": routes_block,
    "shapes": shapes_block,
    "errors": errors_block,
    "cli": cli_block,
    "environment": environment_block,
}


def render(text: str, generators: Mapping[str, Callable[[], str]] = GENERATORS) -> str:
    """``text`` with every generated block written anew; raises on an unknown block name
    and on a generator whose block is missing, so no table is silently left out."""
    seen: set[str] = set()

    def replace(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in generators:
            raise SystemExit(f"docs/reference.md: unknown generated block {name!r}")
        seen.add(name)
        body = generators[name]().strip("\n")
        return f"{match['open']}{body}\n{match['close']}"

    rendered = _BLOCK.sub(replace, text)
    absent = sorted(set(generators) - seen)
    if absent:
        raise SystemExit(f"docs/reference.md: no block for {', '.join(absent)}")
    return rendered


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.docs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is stale")
    args = parser.parse_args(argv)
    current = REFERENCE.read_text(encoding="utf-8")
    rendered = render(current)
    if args.check:
        if rendered != current:
            print(f"{REFERENCE} is stale: run `make docs`", file=sys.stderr)
            return 1
        return 0
    if rendered != current:
        REFERENCE.write_text(rendered, encoding="utf-8")
        print(f"wrote {REFERENCE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
