"""``/mcp_audit``: the latest records of the chat's audit log, sent to the owner alone."""

from __future__ import annotations

from ...core import CommandContext
from ._access import ChatAccess
from ._replies import audit_text
from ._requests import audit_count

__all__ = ["audit"]


async def audit(access: ChatAccess, ctx: CommandContext) -> str:
    count = audit_count(ctx.args)
    shown = audit_text(await (await access.servers(ctx)).audit_records(count))
    # Who did what in the chat is the owner's to read: a group sees none of it.
    if await ctx.ui.send_private(shown) is None:
        return (
            "I could not send you the audit log privately. Start a private chat with me first, "
            "then run /mcp_audit again."
        )
    return f"I sent you the latest records of this chat's audit log {ctx.ui.private_place}."
