"""The minimal MCP server `make bench` (examples/bench_compare.rs) compares sp with: the
official Python SDK (mcp==2.3.0, tests/interop/requirements.txt, in the .venv that
`make interop` creates), stdio, one tool.

    .venv/bin/python bench/fastmcp_server.py

In mcp 2.x FastMCP is named MCPServer (mcp.server.fastmcp only raises an error pointing
there); it is the same high-level server, so the file keeps the name the issue uses.
"""

from mcp.server.mcpserver import MCPServer

server = MCPServer("bench-python")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


if __name__ == "__main__":
    server.run("stdio")
