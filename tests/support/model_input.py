"""What the model got in the latest request a loopback provider recorded."""

from __future__ import annotations

from support.providers import ProviderServer


def user_text(provider: ProviderServer) -> str:
    """The person's message in the latest request, as the model got it."""
    messages = provider.requests[-1].body["messages"]
    content = [m for m in messages if m["role"] == "user"][-1]["content"]
    if isinstance(content, str):
        return content
    return "\n".join(part.get("text", "") for part in content if part.get("type") == "text")
