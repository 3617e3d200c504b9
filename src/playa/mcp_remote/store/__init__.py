"""What a chat's servers are, kept on disk: entries, their sealed secrets, grants and tool pins.

The leaf of ``mcp_remote``: imports nothing from ``transport`` or the lifecycle modules.
"""
