"""ragline as an MCP server: the same use cases as the HTTP API, for agents.

``server.build_server`` defines the tools and resources; ``http.install``
mounts the streamable-HTTP transport at ``/mcp`` on the FastAPI app;
``ragline mcp`` runs it over stdio. Requires the ``mcp`` package (extra
``ragline[mcp]``).
"""
