"""The host's extensions, as the host calls them: each hook bounded, each failure contained.

Also the chats' redactors: every credential the extensions know for a chat, and the host's own.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Collection, Coroutine, Sequence
from typing import Any

import anyio

from ..core import ChatSession, Extension, Redactor, Sender, ToolResult, ToolResultEvent, outbound_secrets
from ._opening import OpenStep

__all__ = ["ChatRedactors", "Extensions"]

logger = logging.getLogger(__name__)


class ChatRedactors:
    """One redactor per chat, rebuilt when what the extensions know for it changes."""

    def __init__(self, extensions: Sequence[Extension], host_secrets: Collection[str]) -> None:
        self._extensions = extensions
        self._host_secrets = host_secrets
        self._redactors: dict[str, tuple[tuple[Collection[str], ...], Redactor]] = {}

    def redactor(self, session: ChatSession | None) -> Redactor:
        """Every credential the chat's extensions know, and the host's own, as one redactor.

        Raises when an extension cannot say (callers fail closed).
        """
        if session is None:
            return self._redactor_for(None, ())
        return self._redactor_for(
            session, tuple(extension.credentials(session) for extension in self._extensions)
        )

    def _redactor_for(self, session: ChatSession | None, key: tuple[Collection[str], ...]) -> Redactor:
        scope = session.scope if session is not None else ""
        cached = self._redactors.get(scope)
        if cached is not None and cached[0] == key:
            return cached[1]
        secrets: set[str] = set(self._host_secrets)
        for values in key:
            secrets.update(values)
        if session is not None:
            # Until the session closes: then nothing of the chat's is left to log them.
            outbound_secrets().hold(session, secrets)
        redactor = Redactor(secrets)
        self._redactors[scope] = (key, redactor)
        return redactor

    def redact(self, session: ChatSession | None, text: str) -> str:
        """Text on its way out of the host for a chat (a reply, an error), every credential removed."""
        try:
            return self.redactor(session).redact(text)
        except Exception as exc:  # boundary: fail closed, say nothing of the text
            logger.error(
                "redacting for %s failed: %s", session.scope if session else "the host", type(exc).__name__
            )
            return "[withheld: a filter failed]"

    def forget(self, session: ChatSession) -> None:
        """The chat closed: its redactor and the credentials it held for the logs go."""
        self._redactors.pop(session.scope, None)
        outbound_secrets().release(session)


class Extensions:
    """Calls every extension's hooks in turn: bounded by the hook timeout, failures logged (redacted)."""

    def __init__(
        self, extensions: Sequence[Extension], hook_timeout: float, redactors: ChatRedactors
    ) -> None:
        self.all = list(extensions)
        self._redactors = redactors
        self._timeouts = {
            id(extension): max(hook_timeout, extension.min_hook_timeout) for extension in self.all
        }

    def timeout(self, extension: Extension) -> float:
        """The bound on one hook of ``extension``: the config's, or longer if the extension needs it."""
        return self._timeouts[id(extension)]

    def opening(self, session: ChatSession) -> list[OpenStep]:
        """The extensions' blocking steps of ``session``'s open (``Extension.session_opening``)."""
        steps: list[OpenStep] = []
        for extension in self.all:
            try:
                run = extension.session_opening(session)
            except Exception as exc:  # boundary: an extension's failure is logged and contained
                self.log_failure(session, f"{extension.id} SessionOpening hook", exc)
                continue
            if run is not None:
                steps.append(OpenStep(extension, run))
        return steps

    def opened(self, session: ChatSession, steps: Sequence[OpenStep]) -> None:
        """The steps ran: what any of them raised is logged here, on the event loop."""
        for step in steps:
            if step.failure is not None:
                self.log_failure(session, f"{step.extension.id} SessionOpening step", step.failure)

    async def session_started(self, session: ChatSession) -> None:
        for extension in self.all:
            await self._hook(session, extension, "SessionStart", extension.on_session_start(session))

    async def scope_moved(self, old_scope: str, session: ChatSession) -> None:
        for extension in self.all:
            await self._hook(session, extension, "ScopeMove", extension.on_scope_move(old_scope, session))

    async def session_closing(self, session: ChatSession) -> None:
        for extension in self.all:
            await self._hook(session, extension, "SessionClose", extension.on_session_close(session))

    async def before_agent_start(self, session: ChatSession) -> None:
        for extension in self.all:
            await self._hook(session, extension, "BeforeAgentStart", extension.on_before_agent_start(session))

    def turn_ended(self, session: ChatSession) -> None:
        for extension in self.all:
            try:
                extension.on_turn_end(session)
            except Exception as exc:  # boundary: an extension's failure is logged and contained
                self.log_failure(session, f"{extension.id} TurnEnd hook", exc)

    def secret_deleted(self, session: ChatSession, sender: Sender, deleted: bool) -> None:
        for extension in self.all:
            try:
                extension.on_secret_deleted(session, sender, deleted)
            except Exception as exc:  # boundary: an extension's failure is logged and contained
                self.log_failure(session, f"{extension.id} SecretDeleted hook", exc)

    async def login_redirect(self, session: ChatSession, sender: Sender, address: str) -> str | None:
        """The answer of the first extension whose login waits for ``address``; None if none does."""
        for extension in self.all:
            try:
                answer = await extension.on_login_redirect(session, sender, address)
            except Exception as exc:  # boundary: an extension's failure is logged and contained
                self.log_failure(session, f"{extension.id} login redirect", exc)
                continue
            if answer is not None:
                return answer
        return None

    async def tool_result(
        self, session: ChatSession, name: str, arguments: dict[str, Any], result: ToolResult
    ) -> ToolResult:
        """``result`` as every ToolResultEvent hook leaves it."""
        event = ToolResultEvent(session=session, tool_name=name, arguments=arguments, result=result)
        for extension in self.all:
            # Not under the hook timeout: a result hook filters text and must not wait on
            # anything, and a cancel scope per result would cost more than the filtering.
            try:
                await extension.on_tool_result(event)
            except Exception as exc:  # boundary: fail closed, the hook may be the one removing credentials
                self.log_failure(session, f"{extension.id} ToolResultEvent hook", exc)
                event.result = ToolResult.error(f"the result of {name} was withheld: a result filter failed")
        return event.result

    async def _hook(
        self, session: ChatSession, extension: Extension, hook: str, call: Coroutine[Any, Any, None]
    ) -> bool:
        try:
            with anyio.fail_after(self.timeout(extension)):
                await call
        except Exception as exc:  # boundary: an extension's failure is logged and contained
            self.log_failure(session, f"{extension.id} {hook} hook", exc)
            return False
        return True

    def log_failure(self, session: ChatSession, what: str, exc: BaseException) -> None:
        # The traceback's messages may quote a credential, so it is logged only once redacted.
        detail = self._redactors.redact(session, "".join(traceback.format_exception(exc)))
        logger.error("%s failed in %s:\n%s", what, session.scope, detail)
