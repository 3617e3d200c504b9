"""Talking to one remote MCP server: connections, egress policy, OAuth, budgets, questions, tasks.

Reads entries from ``store``; knows nothing of chats, commands or presentation.
"""
