"""Playa: a chat-agent host whose chat owners connect their own remote MCP servers."""

__version__ = "0.1.0"

__all__ = ["__version__"]
