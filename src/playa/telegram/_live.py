"""A turn's live message: the reply as the model writes it, and the tools running meanwhile.

In a private chat it is a message draft (``sendMessageDraft``: Telegram animates it and drops
it once the reply is sent); in a group or a topic, one message sent at the first text and
edited as the reply grows, which the final reply replaces in place. Edits go out about once a
second (:attr:`LiveSettings.edit_every`), the newest version each time, so a fast model costs
no more calls than a slow one; flood control (429) is waited out as Telegram asks and slows the
rest of the message down. Nothing is lost by a skipped version: each one holds all the text
shown so far, and the final reply is sent (or edited in) whole.

Every version is the stream's gated text (``ReplyStream.text``: redacted, a tail that could start
a secret held back), formatted as the final reply is; when the formatting joins what the markup
kept apart into something that could be a secret, the version is shown unformatted, redacted,
with the same tail held back.

This module makes its own Bot API calls (drafts and edits are not replies to journal), and
turns their errors into waits or a live message given up; nothing leaves it.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final

import anyio
from telegram import LinkPreviewOptions, ReplyParameters
from telegram.error import BadRequest, RetryAfter, TelegramError

from ..agent import ReplyStream
from ..core import Redactor
from ._markdown import render_markdown
from ._outbox import Outbox, entities_of, retry_seconds
from ._render import render
from ._split import MESSAGE_LIMIT, Part, split_formatted, utf16_len

__all__ = ["LiveMessage", "LiveSettings", "Place"]

logger = logging.getLogger(__name__)

_RUNNING: Final = "⚙ {name}…"
_MARKERS: Final = re.compile(r"[*_~`\\]")
"""What Markdown may put inside a word: emphasis, code and escape markers."""
_FINAL_ATTEMPTS: Final = 3
"""Tries of the edit that puts the reply in place (flood control waited out between them)."""
_MAX_SLOWDOWN: Final = 8.0
"""How many times slower than ``edit_every`` flood control may make a live message."""


@dataclass(frozen=True, kw_only=True)
class LiveSettings:
    """How often a live message changes."""

    edit_every: float = 1.0
    """Seconds between two edits of a group's live message (Telegram allows about one a second per chat)."""
    draft_every: float = 0.3
    """Seconds between two versions of a private chat's draft."""


@dataclass(frozen=True, kw_only=True)
class Place:
    """Where the live message shows: the chat, its topic, the message it answers."""

    chat_id: int
    thread_id: int | None
    message_id: int | None
    private: bool


class LiveMessage:
    """One turn's live message (``ReplyStream``'s front end); its task runs while ``running()`` does."""

    def __init__(
        self,
        outbox: Outbox,
        place: Place,
        *,
        redactor: Callable[[], Redactor],
        redact: Callable[[str], str],
        settings: LiveSettings | None = None,
    ) -> None:
        self._outbox = outbox
        self._redact_reply = redact
        """The host's redaction of a reply (it fails closed), for the final reply."""
        self._place = place
        self._redactor = redactor
        self._settings = settings or LiveSettings()
        self._stream: ReplyStream | None = None
        self._progress: dict[str, str] = {}
        self._changed = anyio.Event()
        self._shown: Part | None = None
        self._message_id: int | None = None
        self._every = self._settings.draft_every if place.private else self._settings.edit_every
        self._next = -math.inf
        """When the next version may go out (the event loop's clock)."""
        self._given_up = False
        self.versions = 0
        """Versions shown so far (drafts or the message and its edits)."""
        self.active = False
        """Whether its turn runs: a task's progress after the turn goes to a message of its own."""

    # What the turn tells it (never blocks)

    def changed(self, stream: ReplyStream) -> None:
        """The reply or its tools changed (``LiveReply``)."""
        self._stream = stream
        self._changed.set()

    def progress(self, key: str, text: str) -> None:
        """A call's progress (``UI.progress``, redacted already): a line under the text, replaced by the next."""
        self._progress.pop(key, None)
        self._progress[key] = text
        self._changed.set()

    # Its task

    @asynccontextmanager
    async def running(self) -> AsyncIterator[LiveMessage]:
        """Show versions while the block runs (the turn); the last one is shown when it ends."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._run)
            self.active = True
            try:
                yield self
            finally:
                self.active = False
                tg.cancel_scope.cancel()

    async def _run(self) -> None:
        while not self._given_up:
            await self._changed.wait()
            await anyio.sleep(max(0.0, self._next - anyio.current_time()))
            self._changed = anyio.Event()
            part = self._version()
            if part is None or part == self._shown:
                continue
            await self._show(part)

    def _version(self) -> Part | None:
        """What the message shows now: the reply's text, formatted, then the tools' lines."""
        stream = self._stream
        text = stream.text() if stream is not None else ""
        lines = [_RUNNING.format(name=name) for name in (stream.running.values() if stream else ())]
        status = self._redact("\n".join([*lines, *self._progress.values()]))
        if not text.strip() and not status:
            return None
        part = self._formatted(text) if text.strip() else Part("")
        if not status:
            return part
        if not part.text:
            return split_formatted(status, [])[0]
        joined = f"{part.text}\n\n{status}"
        # The lines go under the text while they fit: the text is what the person waits for.
        return Part(joined, part.entities) if utf16_len(joined) <= MESSAGE_LIMIT else part

    def _formatted(self, text: str) -> Part:
        """``text`` formatted as the reply will be, unless its text without markup could hold a
        secret or end in the head of one; its first message's worth.

        The final reply is checked once its markup is rendered (``render``); a version may end
        inside an emphasis not yet closed, whose marker is still in the text, so the check here
        leaves every marker out: ``sk-ab**cd`` is the head of ``sk-abcd…``.
        """
        plain, spans = render_markdown(text)
        bare = _MARKERS.sub("", plain)
        try:
            redactor = self._redactor()
            held = redactor.held_from(bare)
            if held < len(bare) or redactor.contains(bare):
                plain, spans = redactor.redact(bare[:held]), []
        except Exception as exc:  # boundary: a failing filter shows nothing of the text
            logger.error("the live message's filter failed: %s", type(exc).__name__)
            return Part("")
        return split_formatted(plain, spans)[0]

    def _redact(self, text: str) -> str:
        try:
            return self._redactor().redact(text)
        except Exception as exc:  # boundary: a failing filter shows nothing of the lines
            logger.error("the live message's filter failed: %s", type(exc).__name__)
            return ""

    async def _show(self, part: Part) -> None:
        place = self._place
        try:
            if place.private:
                await self._outbox.bot.send_message_draft(
                    place.chat_id,
                    place.message_id or 1,
                    part.text,
                    message_thread_id=place.thread_id,
                    entities=entities_of(part),
                )
            elif self._message_id is None:
                sent = await self._outbox.bot.send_message(
                    place.chat_id,
                    part.text,
                    entities=entities_of(part),
                    message_thread_id=place.thread_id,
                    reply_parameters=_reply_to(place),
                    link_preview_options=LinkPreviewOptions(is_disabled=True),
                )
                self._message_id = sent.message_id
            else:
                await self._edit(self._message_id, part)
        except RetryAfter as exc:
            # The version is not lost: the next one holds it, sent once Telegram allows it.
            wait = retry_seconds(exc)
            self._every = min(self._every * 2, self._settings.edit_every * _MAX_SLOWDOWN)
            self._next = anyio.current_time() + max(wait, self._every)
            self._changed.set()
            logger.info("live message in chat %s: flood control, next in %.1f s", place.chat_id, wait)
            return
        except BadRequest as exc:
            if "not modified" not in str(exc).lower():
                logger.info("live message in chat %s given up: %s", place.chat_id, exc)
                self._given_up = True
            return
        except TelegramError as exc:
            logger.info("live message in chat %s given up: %s: %s", place.chat_id, type(exc).__name__, exc)
            self._given_up = True
            return
        self._shown = part
        self.versions += 1
        self._next = anyio.current_time() + self._every

    async def _edit(self, message_id: int, part: Part) -> None:
        await self._outbox.bot.edit_message_text(
            part.text,
            chat_id=self._place.chat_id,
            message_id=message_id,
            entities=entities_of(part),
            link_preview_options=LinkPreviewOptions(is_disabled=True),
        )

    # The end

    async def finish(self, text: str, *, markdown: bool) -> bool:
        """Put the reply in place of the group's live message; whether it is shown so.

        When it is not (a private chat, where the posted reply replaces the draft; no live
        message; a reply longer than one message; an edit refused), the reply is to be posted
        as any reply is, and the live message is deleted. Flood control is waited out here.
        """
        message_id = self._message_id
        if message_id is None:
            return False
        parts = render(text, markdown=markdown, redact=self._redact_reply)
        if len(parts) == 1:
            for _ in range(_FINAL_ATTEMPTS):
                await anyio.sleep(max(0.0, self._next - anyio.current_time()))
                try:
                    await self._edit(message_id, parts[0])
                    return True
                except RetryAfter as exc:
                    self._next = anyio.current_time() + retry_seconds(exc)
                except BadRequest as exc:
                    if "not modified" in str(exc).lower():
                        return True
                    logger.info("the live message in chat %s was not replaced: %s", self._place.chat_id, exc)
                    break
                except TelegramError as exc:
                    logger.info("the live message in chat %s was not replaced: %s", self._place.chat_id, exc)
                    break
        await self._outbox.delete(self._place.chat_id, message_id)
        return False


def _reply_to(place: Place) -> ReplyParameters | None:
    if place.message_id is None:
        return None
    return ReplyParameters(message_id=place.message_id, allow_sending_without_reply=True)
