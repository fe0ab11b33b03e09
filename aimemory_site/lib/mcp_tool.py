"""The tool contract between the MCP endpoint and the apps that implement tools.

An app declares ``Tool`` values (name, description, input schema, handler); the endpoint
lists them, checks each call's arguments against the schema, runs the handler and turns
its answer, or the AppError it raised, into an MCP tool result. That mapping lives here
once, so every tool reports business errors the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aimemory_site.lib.errors import AppError, BadRequest, Code
from aimemory_site.lib.principal import Principal

# MCP tool annotations (docs/reference.md#status-replies-and-retries). No tool here reaches outside the server.
READS: Mapping[str, bool] = {"readOnlyHint": True, "openWorldHint": False}
WRITES: Mapping[str, bool] = {
    "readOnlyHint": False,
    "destructiveHint": False,
    "openWorldHint": False,
}
CANCELS: Mapping[str, bool] = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": True,
    "openWorldHint": False,
}

# The caller's own scope, as every scoped tool takes it.
OWN_WORKSPACE = {"type": "string", "description": "Your project's workspace."}
OWN_PROJECT = {
    "type": "string",
    "description": "Your project, with workspace, as the SessionStart notice names it.",
}


def object_schema(properties: dict[str, Any], *required: str) -> dict[str, Any]:
    """A tool's input schema: a closed object of these properties."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    return schema


# The JSON Schema subset the argument check implements. Tool schemas may use nothing
# else (Tool checks that when it is declared), so the check never silently ignores a
# constraint a client was shown.
_PROPERTY_KEYWORDS = frozenset({"type", "description"})
_PROPERTY_TYPES = frozenset({"string", "integer", "boolean"})


@dataclass(frozen=True)
class ToolCall:
    """One ``tools/call``: who calls, with which checked arguments, from which session.

    ``arguments`` conform to the tool's input schema; ``session_id`` is the lifecycle-hook
    session the client named (header or ``_meta``), or None.
    """

    principal: Principal
    arguments: Mapping[str, Any]
    session_id: str | None
    # Whether the caller has gone (the server's ``CLIENT_GONE``), for a waiting call.
    client_gone: Callable[[], bool] | None = None
    # The 2026-07-28 multi-round trip: whether the client renders form elicitations, and
    # on a retry what it answered (``inputResponses``, by request key) and the opaque
    # ``requestState`` it echoed. Always false and None in the initialize era.
    can_elicit: bool = False
    input_responses: Mapping[str, Any] | None = None
    request_state: str | None = None

    def text(self, name: str) -> str | None:
        value = self.arguments.get(name)
        return value if isinstance(value, str) else None

    def required_text(self, name: str) -> str:
        """A string argument the schema requires, so the check already ensured it."""
        value = self.arguments[name]
        assert isinstance(value, str)
        return value

    def integer(self, name: str) -> int | None:
        value = self.arguments.get(name)
        return value if isinstance(value, int) else None

    def boolean(self, name: str) -> bool:
        """A boolean argument; absent is false."""
        return self.arguments.get(name) is True


@dataclass(frozen=True)
class InputRequired:
    """A handler's answer when the person must fill a form first: the client shows each
    request, then calls the tool again with the same arguments, ``inputResponses`` (by
    the same keys) and ``state`` echoed as ``requestState``. Only for a call whose
    ``can_elicit`` is set."""

    requests: Mapping[str, Mapping[str, Any]]
    state: str


def form_request(message: str, schema: Mapping[str, Any]) -> dict[str, Any]:
    """One form elicitation as an ``InputRequired`` request: ``message`` shown to the
    person, ``schema`` a flat object schema of the fields they fill."""
    return {
        "method": "elicitation/create",
        "params": {"mode": "form", "message": message, "requestedSchema": dict(schema)},
    }


ToolHandler = Callable[[ToolCall], dict[str, Any] | InputRequired]


@dataclass(frozen=True)
class Tool:
    """A tool as ``tools/list`` shows it, plus the handler that answers its calls.

    The input schema is a flat object of string, integer and boolean properties with
    ``additionalProperties: false``; the handler may raise AppError.
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: ToolHandler
    # MCP tool annotations (readOnlyHint, destructiveHint, ...), shown in tools/list:
    # clients decide by them which tools run without asking in restricted modes.
    annotations: Mapping[str, bool] | None = None

    def __post_init__(self) -> None:
        schema = self.input_schema
        properties = schema.get("properties")
        closed = schema.get("type") == "object" and schema.get("additionalProperties") is False
        if not closed or not isinstance(properties, dict):
            raise ValueError(f"{self.name}: the input schema must be a closed object")
        for prop, spec in properties.items():
            if not set(spec) <= _PROPERTY_KEYWORDS or spec.get("type") not in _PROPERTY_TYPES:
                raise ValueError(f"{self.name}.{prop}: the argument check cannot enforce {spec}")
        if not set(schema.get("required", ())) <= set(properties):
            raise ValueError(f"{self.name}: a required argument is not a property")

    def listing(self) -> dict[str, Any]:
        """The ``tools/list`` entry."""
        entry: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
        }
        if self.annotations:
            entry["annotations"] = dict(self.annotations)
        return entry

    def call(
        self,
        *,
        principal: Principal,
        arguments: Any,
        session_id: str | None,
        client_gone: Callable[[], bool] | None = None,
        can_elicit: bool = False,
        input_responses: Mapping[str, Any] | None = None,
        request_state: str | None = None,
    ) -> dict[str, Any]:
        """Check ``arguments``, run the handler and return the MCP tool result, or the
        ``input_required`` result of a handler that asks the person first.

        A refusal, business error or bad argument becomes an ``isError`` result whose text
        is the error message, so the agent reads what to do instead of a protocol failure.
        """
        try:
            checked = self._arguments_check(arguments)
            payload = self.handler(
                ToolCall(
                    principal=principal,
                    arguments=checked,
                    session_id=session_id,
                    client_gone=client_gone,
                    can_elicit=can_elicit,
                    input_responses=input_responses,
                    request_state=request_state,
                )
            )
        except AppError as exc:
            return {"content": [{"type": "text", "text": exc.message}], "isError": True}
        if isinstance(payload, InputRequired):
            if not can_elicit:
                raise ValueError(f"{self.name}: asked for input from a client that cannot give it")
            return {
                "resultType": "input_required",
                "inputRequests": {key: dict(request) for key, request in payload.requests.items()},
                "requestState": payload.state,
            }
        return {
            "content": [{"type": "text", "text": json.dumps(payload, ensure_ascii=False)}],
            "structuredContent": payload,
            "isError": False,
        }

    def _arguments_check(self, arguments: Any) -> dict[str, Any]:
        """Return the arguments with JSON integers as ints, or raise BadRequest naming every fault."""
        if not isinstance(arguments, dict):
            raise BadRequest(
                f"{self.name}: arguments must be an object. {self._signature()}",
                code=Code.INVALID_ARGUMENTS,
            )
        properties: dict[str, dict[str, Any]] = self.input_schema["properties"]
        problems = [f"unknown argument {name!r}" for name in arguments if name not in properties]
        problems += [
            f"missing required argument {name!r}"
            for name in self.input_schema.get("required", ())
            if name not in arguments
        ]
        checked: dict[str, Any] = {}
        for name, value in arguments.items():
            spec = properties.get(name)
            if spec is None:
                continue
            normalised, problem = _value_check(name, value, spec)
            if problem:
                problems.append(problem)
            checked[name] = normalised
        if problems:
            raise BadRequest(
                f"{self.name}: {'; '.join(problems)}. {self._signature()}",
                code=Code.INVALID_ARGUMENTS,
            )
        return checked

    def _signature(self) -> str:
        required = set(self.input_schema.get("required", ()))
        names = [
            name if name in required else f"{name}?" for name in self.input_schema["properties"]
        ]
        return f"It takes ({', '.join(names)})."


def _value_check(name: str, value: Any, spec: Mapping[str, Any]) -> tuple[Any, str | None]:
    """Check one argument against its property schema: the value as used, and the fault."""
    expected = spec["type"]
    if expected == "integer" and isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON Schema counts 5.0 as an integer
    if expected == "string":
        ok = isinstance(value, str)
    elif expected == "boolean":
        ok = isinstance(value, bool)
    else:
        ok = isinstance(value, int) and not isinstance(value, bool)
    if not ok:
        return value, f"argument {name!r} must be {_article(expected)}, got {_json_type(value)}"
    return value, None


def _article(json_type: str) -> str:
    return f"an {json_type}" if json_type[0] in "aeiou" else f"a {json_type}"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
