"""The owner's decisions on a server's new or changed tools and instructions: ``/mcp_review`` shows
them, ``/mcp_approve`` and ``/mcp_reject`` decide."""

from __future__ import annotations

from ...core import CommandContext, render_approval
from ...exceptions import StoreError
from ._access import ChatAccess, server_named
from ._requests import ServerName

__all__ = ["decide", "review"]


async def review(access: ChatAccess, ctx: CommandContext) -> str:
    chat = await access.servers(ctx, announce=False)
    name = ServerName.of(ctx, ctx.args)
    states = [server_named(chat, name, "/mcp_review [name]")] if name.text else list(chat.servers.values())
    shown: list[str] = []
    for state in sorted(states, key=lambda s: s.entry.name):
        approval = await chat.review.show(state)
        if isinstance(approval, str):  # too large to show: rejected, and why
            shown.append(approval)
        elif approval is not None:
            shown.append(render_approval(approval))
    if not shown:
        return (
            f"No tool changes of {name.text} wait for review."
            if name.text
            else "No tool changes wait for review."
        )
    return "\n\n".join(shown)


async def decide(access: ChatAccess, ctx: CommandContext, *, approve: bool) -> str:
    chat = await access.servers(ctx, announce=False)
    usage = "/mcp_approve <name>" if approve else "/mcp_reject <name>"
    # After the name, an approval's digest: what a button shows is what it decides.
    name, _, digest = ctx.args.strip().partition(" ")
    state = server_named(chat, ServerName.of(ctx, name), usage)
    try:
        return await chat.review.decide(state.entry.name, approve=approve, digest=digest.strip() or None)
    except StoreError as exc:
        return f"Nothing was decided: {exc}"
    finally:
        await chat.review.owner_seen(ctx.ui)
