"""A chat's sealed server file, read beside the extension that keeps it: an entry saved as an older
Playa saved it, and the note the owner gets when its definitions are pinned at last."""

from __future__ import annotations

import anyio

from playa.core import ChatSession
from playa.mcp_remote import HostSecret
from playa.mcp_remote.store import Pins, Sealer, ServerStore
from support.chat import ScriptedUI


def chat_store(session: ChatSession, secret: HostSecret) -> ServerStore:
    """The server file of ``session``'s chat, with its copy in the chat's private folder."""
    return ServerStore(session.workspace, session.scope, Sealer(secret.value), state_dir=session.state_dir)


async def saved_pins(store: ServerStore, name: str) -> Pins:
    """The pins sealed with the entry ``name``, which must have some."""
    entry = (await anyio.to_thread.run_sync(store.load)).entry(name)
    assert entry is not None and entry.pins is not None
    return entry.pins


def pinned_now(owner: ScriptedUI) -> list[str]:
    """What the owner was told of definitions pinned only now."""
    return [text for text in owner.sent if "pinned now" in text]
