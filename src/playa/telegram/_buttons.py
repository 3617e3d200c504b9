"""Inline keyboards: buttons meant for one person, answered at once, honoured only from them."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup

from ._outbox import Outbox

__all__ = ["Buttons"]

NOT_FOR_YOU: Final = "This button is for someone else."
EXPIRED: Final = "This button no longer does anything."


@dataclass(frozen=True, slots=True)
class _Keyboard:
    chat_id: int
    user_id: int
    labels: tuple[str, ...]
    on_press: Callable[[str], None]


class Buttons:
    """The live keyboards of the bot, by the random token in their callback data."""

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox
        self._live: dict[str, _Keyboard] = {}

    @contextmanager
    def keyboard(
        self, chat_id: int, user_id: int, labels: Sequence[str], on_press: Callable[[str], None]
    ) -> Iterator[InlineKeyboardMarkup]:
        """A one-row keyboard for ``user_id`` in ``chat_id``, live while the block runs.

        ``on_press(label)`` runs when that user presses a button; anyone else is told it is
        not for them. The callback data holds a random token, never the label or any text.
        """
        token = secrets.token_urlsafe(12)
        self._live[token] = _Keyboard(chat_id, user_id, tuple(labels), on_press)
        try:
            yield InlineKeyboardMarkup(
                [
                    [
                        InlineKeyboardButton(label, callback_data=f"{token}:{i}")
                        for i, label in enumerate(labels)
                    ]
                ]
            )
        finally:
            del self._live[token]

    async def pressed(self, query: CallbackQuery) -> None:
        """Handle a button press: answered at once, honoured only from the person it was meant for."""
        token, _, index = (query.data or "").partition(":")
        keyboard = self._live.get(token)
        message = query.message
        chat_id = message.chat.id if message is not None else None
        if keyboard is None or chat_id != keyboard.chat_id or not index.isdigit():
            await self._outbox.answer_button(query.id, EXPIRED)
            return
        if query.from_user.id != keyboard.user_id:
            await self._outbox.answer_button(query.id, NOT_FOR_YOU)
            return
        position = int(index)
        if position >= len(keyboard.labels):
            await self._outbox.answer_button(query.id, EXPIRED)
            return
        await self._outbox.answer_button(query.id)
        keyboard.on_press(keyboard.labels[position])
