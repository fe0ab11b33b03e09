"""The MCP endpoint: stateless JSON-RPC over Streamable HTTP (DESIGN.md section 7).

``protocol`` holds the wire vocabulary of both protocol eras, ``tools`` the tool contract
the apps implement (``messaging.mcp_tools``), ``server`` answers one decoded message, and
``views`` is the HTTP edge (method, Origin, bearer, body).
"""
