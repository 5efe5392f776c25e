"""Tool sources an agent can be given beside its own: the tools of MCP servers.

`fathom.tools.mcp` connects to MCP servers (stdio, streamable HTTP, SSE) and turns their
tools into LangChain tools; `fathom.tools.mcp_config` reads their configuration
(`[mcp_servers]` in fathom.toml, `.mcp.json`). The public path is `fathom.mcp`.

Layer: capabilities, beside `fathom.middleware`; imports only the core. The MCP *server*
(`fathom mcp serve`) is a front end, in `fathom.protocols.mcp`.
"""
