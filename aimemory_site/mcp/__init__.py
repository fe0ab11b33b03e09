"""The MCP endpoint: stateless JSON-RPC over Streamable HTTP (docs/reference.md#mcp-tools).

``protocol`` holds the wire vocabulary of both protocol eras, ``tools`` the tool contract
the apps implement (``messaging.mcp_tools``), ``server`` answers one decoded message, and
``views`` is the HTTP edge (method, Origin, bearer, body).
"""
