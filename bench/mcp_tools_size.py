"""The size of the MCP ``tools/list`` answer: every agent pays it on every session.

``python -m bench.mcp_tools_size`` prints it. The answer is built by the endpoint's own
code, byte for byte what ``POST /mcp`` sends, without a server or a database.
"""

from __future__ import annotations

import json
import os

import django

# Tokens are estimated as characters / 4, the usual rule of thumb for English and JSON.
CHARS_PER_TOKEN = 4
_TOOLS_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}


def tools_list_size() -> dict[str, int]:
    """Characters and approximate tokens of the ``tools/list`` answer, in both eras.

    ``chars``/``approx_tokens`` are the initialize-era answer most clients get today;
    the ``modern_`` pair is the 2026-07-28 answer, which adds ``resultType``, the cache
    hints and the server-info stamp.
    """
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aimemory_site.settings")
    django.setup()
    from aimemory_site.lib.principal import Principal
    from aimemory_site.mcp.protocol import (
        CLIENT_CAPABILITIES_META,
        METHOD_HEADER,
        MODERN_VERSIONS,
        PROTOCOL_VERSION_HEADER,
        PROTOCOL_VERSION_META,
    )
    from aimemory_site.mcp.server import handle_body

    anonymous = Principal.anonymous()
    handshake = handle_body(json.dumps(_TOOLS_LIST).encode(), headers={}, principal=anonymous)
    modern_version = MODERN_VERSIONS[-1]
    modern_request = {
        **_TOOLS_LIST,
        "params": {"_meta": {PROTOCOL_VERSION_META: modern_version, CLIENT_CAPABILITIES_META: {}}},
    }
    modern = handle_body(
        json.dumps(modern_request).encode(),
        headers={PROTOCOL_VERSION_HEADER: modern_version, METHOD_HEADER: "tools/list"},
        principal=anonymous,
    )
    chars = len(handshake.content().decode())
    modern_chars = len(modern.content().decode())
    return {
        "chars": chars,
        "approx_tokens": chars // CHARS_PER_TOKEN,
        "modern_chars": modern_chars,
        "modern_approx_tokens": modern_chars // CHARS_PER_TOKEN,
    }


if __name__ == "__main__":
    size = tools_list_size()
    print(
        f"tools/list: {size['chars']} chars, about {size['approx_tokens']} tokens "
        f"(2026-07-28: {size['modern_chars']} chars, about {size['modern_approx_tokens']} tokens)"
    )
