"""Inline keyboards: buttons meant for one person, answered at once, honoured only from them."""

from __future__ import annotations

import inspect
import secrets
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final

from telegram import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup

from ._outbox import Outbox

__all__ = ["Buttons", "Keyboard"]

NOT_FOR_YOU: Final = "This button is for someone else."
EXPIRED: Final = "This button no longer does anything."
LABEL_LIMIT: Final = 60
"""Characters of a button's label; Telegram shows a long one cut anyway."""


@dataclass(eq=False)
class Keyboard:
    """The buttons of one question, for ``user_id`` in ``chat_id``; its layout may change as it is answered.

    Each button stands for a key (``accept``, a field, an option), which the press hands to
    ``on_press``. The callback data holds a random token and the key's number, never a label or
    any text.
    """

    chat_id: int
    """Where its messages are; a group's upgrade moves it to the supergroup's id."""
    user_id: int
    on_press: Callable[[str], object]
    refusal: str = NOT_FOR_YOU
    """What anyone else who presses is told."""
    token: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    keys: list[str] = field(default_factory=list)

    def markup(self, rows: Sequence[Sequence[tuple[str, str]]]) -> InlineKeyboardMarkup:
        """The keyboard for rows of ``(label, key)``."""
        return InlineKeyboardMarkup(
            [
                [InlineKeyboardButton(_cut(label), callback_data=self._data(key)) for label, key in row]
                for row in rows
            ]
        )

    def _data(self, key: str) -> str:
        if key not in self.keys:
            self.keys.append(key)
        return f"{self.token}:{self.keys.index(key)}"


def _cut(label: str) -> str:
    label = " ".join(label.split())
    return label if len(label) <= LABEL_LIMIT else label[: LABEL_LIMIT - 1] + "…"


class Buttons:
    """The live keyboards of the bot, by the random token in their callback data."""

    def __init__(self, outbox: Outbox) -> None:
        self._outbox = outbox
        self._live: dict[str, Keyboard] = {}

    @contextmanager
    def live(self, chat_id: int, user_id: int, on_press: Callable[[str], object]) -> Iterator[Keyboard]:
        """A keyboard for ``user_id`` in ``chat_id``, live while the block runs.

        ``on_press(key)`` runs when that user presses one of its buttons; anyone else is told
        it is not for them.
        """
        keyboard = self.add(chat_id, user_id, on_press)
        try:
            yield keyboard
        finally:
            self.remove(keyboard)

    def add(
        self, chat_id: int, user_id: int, on_press: Callable[[str], object], *, refusal: str = NOT_FOR_YOU
    ) -> Keyboard:
        """A keyboard for ``user_id`` in ``chat_id``, live until ``remove``: anyone else is told ``refusal``."""
        keyboard = Keyboard(chat_id, user_id, on_press, refusal)
        self._live[keyboard.token] = keyboard
        return keyboard

    def remove(self, keyboard: Keyboard) -> None:
        """The keyboard's buttons do nothing from now on (a press is told so)."""
        self._live.pop(keyboard.token, None)

    async def pressed(self, query: CallbackQuery) -> None:
        """Handle a button press: answered at once, honoured only from the person it was meant for."""
        token, _, index = (query.data or "").partition(":")
        keyboard = self._live.get(token)
        message = query.message
        chat_id = message.chat.id if message is not None else None
        if keyboard is None and message is not None:
            # Its question ended, or the bot restarted since: the buttons go, so nobody tries again.
            await self._outbox.answer_button(query.id, EXPIRED)
            await self._outbox.drop_buttons(message.chat.id, message.message_id)
            return
        if keyboard is None or chat_id != keyboard.chat_id or not index.isdigit():
            await self._outbox.answer_button(query.id, EXPIRED)
            return
        if query.from_user.id != keyboard.user_id:
            await self._outbox.answer_button(query.id, keyboard.refusal)
            return
        position = int(index)
        if position >= len(keyboard.keys):
            await self._outbox.answer_button(query.id, EXPIRED)
            return
        await self._outbox.answer_button(query.id)
        # A press may redraw its message (a panel's question) before the next update is taken.
        if inspect.isawaitable(done := keyboard.on_press(keyboard.keys[position])):
            await done
