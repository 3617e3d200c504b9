"""A server's question as one Telegram message: its text, its buttons, and what each press does.

The message lists every field with the value it will take; a button per field changes it. A
yes-or-no field toggles; a choice opens its options (a few, as buttons); any other field is
asked with a forced reply. Accept takes what is shown — the defaults for what was left alone
(SEP-1034) — and asks for a required field still empty. Nothing here talks to Telegram.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from ..core import Answer, Field, FieldValue, Question, accepted, check_link, field_value, shown
from ._split import MESSAGE_LIMIT, utf16_len

__all__ = ["ACCEPT", "CANCEL", "DECLINE", "Form", "Prompt", "url_text"]

ACCEPT: Final = "Accept"
DECLINE: Final = "Decline"
CANCEL: Final = "Cancel"
MAX_OPTION_BUTTONS: Final = 12
"""A choice with more options than this is typed, in a reply, instead of picked from buttons."""
_DESCRIPTION_SHOWN: Final = 80
_ANSWERS: Final = (
    (ACCEPT, "accept"),
    (DECLINE, "decline"),
    (CANCEL, "cancel"),
)
_OUTCOMES: Final = {
    "accept": "Accepted.",
    "decline": "Declined.",
    "cancel": "Cancelled.",
}

Row = list[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class Prompt:
    """Ask for ``field`` with a forced reply; ``problem`` says what was wrong with the last reply."""

    field: Field
    problem: str = ""

    @property
    def text(self) -> str:
        item = self.field
        about = f" ({item.description})" if item.description else ""
        if item.kind == "choice":
            kind = f"one of: {', '.join(item.options)}"
        elif item.kind == "choices":
            kind = f"some of: {', '.join(item.options)}, comma separated"
        elif item.kind in ("number", "integer"):
            kind = "a whole number" if item.kind == "integer" else "a number"
        else:
            kind = "text"
        lead = f"{self.problem} " if self.problem else ""
        return f"{lead}Reply with {_label(item)}{about}: {kind}."


def _label(item: Field) -> str:
    return item.title or item.name


def url_text(question: Question) -> str:
    """A link question, for the asker's private chat: the link whole, its domain on a line, the warnings.

    The server's text is cut, if need be, so that the link and what follows it fit in the message.
    """
    link = (
        "\n\nIt asks you to open this link (nothing was fetched from it):\n"
        + "\n".join(check_link(question.url or "").lines())
        + f"\n\nPress {ACCEPT} if you will open it, {DECLINE}, or {CANCEL}."
    )
    text = f"{question.asker} asks: {question.text}"
    room = MESSAGE_LIMIT - utf16_len(link)
    if utf16_len(text) > room:
        while utf16_len(text) > room - 1:
            text = text[:-1]
        text += "…"
    return text + link


@dataclass(eq=False)
class Form:
    """A form question being filled in: the values chosen so far, and which options are open."""

    question: Question
    values: dict[str, FieldValue] = field(default_factory=dict)
    open: int | None = None
    """The field whose options the keyboard shows instead of the form."""
    note: str = ""
    """Why the last press did not end the question (a required field is empty)."""

    def text(self, outcome: str | None = None) -> str:
        """The message: the question, each field with the value it takes, and what to do (or what was done)."""
        lines = [f"{self.question.asker} asks: {self.question.text}"]
        if self.question.fields:
            lines.append("")
        for item in self.question.fields:
            about = item.description
            if len(about) > _DESCRIPTION_SHOWN:
                about = about[: _DESCRIPTION_SHOWN - 1] + "…"
            line = f"• {_label(item)}: {self._value_text(item)}"
            lines.append(line + (f" — {about}" if about and outcome is None else ""))
        lines.append("")
        if self.note and outcome is None:
            lines.append(self.note)
        if outcome is not None:
            lines.append(outcome)
        elif self.question.fields:
            lines.append(
                f"Change a value with its button, then press {ACCEPT}: what you leave takes the default."
            )
        else:
            lines.append(f"Press {ACCEPT}, {DECLINE} or {CANCEL}.")
        return "\n".join(lines)

    @staticmethod
    def outcome(answer: Answer, *, timed_out: bool = False) -> str:
        if timed_out:
            return "Nobody answered in time: cancelled."
        return _OUTCOMES[answer.action]

    def _value_text(self, item: Field) -> str:
        if item.name in self.values:
            return shown(self.values[item.name])
        if item.default is not None:
            return f"{shown(item.default)} (default)"
        return "required, not given" if item.required else "not given"

    def rows(self) -> list[Row]:
        """The keyboard: the open field's options, or a button per field and the three answers."""
        if self.open is not None:
            return self._option_rows(self.open)
        rows: list[Row] = []
        for index, item in enumerate(self.question.fields):
            if item.kind == "boolean":
                ticked = self.values.get(item.name, item.default) is True
                rows.append([(f"{'☑' if ticked else '☐'} {_label(item)}", f"f{index}")])
            else:
                mark = "▾" if self._has_buttons(item) else "✎"
                rows.append([(f"{mark} {_label(item)}: {self._value_text(item)}", f"f{index}")])
        rows.append(list(_ANSWERS))
        return rows

    def _option_rows(self, index: int) -> list[Row]:
        item = self.question.fields[index]
        current = self.values.get(item.name, item.default)
        chosen = current if isinstance(current, list) else [current]
        buttons = [
            (f"{'☑ ' if option in chosen else ''}{option}", f"o{index}:{number}")
            for number, option in enumerate(item.options)
        ]
        rows = [buttons[start : start + 2] for start in range(0, len(buttons), 2)]
        rows.append([("Done" if item.kind == "choices" else "‹ Back", "back")])
        return rows

    @staticmethod
    def _has_buttons(item: Field) -> bool:
        return item.kind in ("choice", "choices") and 0 < len(item.options) <= MAX_OPTION_BUTTONS

    def press(self, key: str) -> Answer | Prompt | None:
        """What a press does: an answer (the question ends), a field to ask for, or ``None`` (show the form again)."""
        self.note = ""
        if key == "accept":
            complete = accepted(self.question, self.values)
            return complete if isinstance(complete, Answer) else self._ask(complete)
        if key in ("decline", "cancel"):
            action: Literal["decline", "cancel"] = "decline" if key == "decline" else "cancel"
            return Answer(action)
        if key == "back":
            self.open = None
            return None
        fields = self.question.fields
        if key.startswith("f") and key[1:].isdigit() and int(key[1:]) < len(fields):
            index = int(key[1:])
            item = fields[index]
            if item.kind == "boolean":
                self.values[item.name] = self.values.get(item.name, item.default) is not True
                return None
            if self._has_buttons(item):
                self.open = index
                return None
            return Prompt(item)
        if key.startswith("o"):
            where, _, number = key[1:].partition(":")
            if where.isdigit() and number.isdigit() and int(where) < len(fields):
                self._choose(fields[int(where)], int(number))
        return None

    def _ask(self, item: Field) -> Prompt | None:
        if self._has_buttons(item):
            self.open = self.question.fields.index(item)
            self.note = f"{_label(item)} is required: pick one, then press {ACCEPT} again."
            return None
        return Prompt(item, f"{_label(item)} is required.")

    def _choose(self, item: Field, number: int) -> None:
        if number >= len(item.options):
            return
        option = item.options[number]
        if item.kind == "choice":
            self.values[item.name] = option
            self.open = None
            return
        current = self.values.get(item.name, item.default)
        chosen = list(current) if isinstance(current, list) else []
        chosen = [value for value in chosen if value != option] if option in chosen else [*chosen, option]
        # Kept in the options' order, as the server listed them.
        self.values[item.name] = [value for value in item.options if value in chosen]

    def reply(self, prompt: Prompt, text: str) -> Prompt | None:
        """Take a reply to ``prompt``: ``None`` once the value is set, or the prompt again with what was wrong."""
        try:
            self.values[prompt.field.name] = field_value(prompt.field, text)
        except ValueError as problem:
            return Prompt(prompt.field, str(problem))
        return None
