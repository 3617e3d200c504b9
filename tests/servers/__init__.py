"""Servers that tests run on loopback: real MCP servers and raw-socket fault servers."""
