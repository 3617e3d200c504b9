"""Questions a tool's server asks a person during a turn: what is asked, and what the answer is.

A front end shows a ``Question`` to the person whose message started the turn and returns an
``Answer``: accept (with values), decline, or cancel. The text answer every front end takes is
one line, parsed here so it has one home: ``/accept [field=value …]`` (fields left out take
their defaults), ``/decline``, ``/cancel``.

A ``permission`` question is a call that waits for the chat's owner: it goes to the owner
alone, whoever's turn made the call, and is answered ``/allow`` (accept), ``/allow always``
(accept with ``ALWAYS``), or ``/deny`` (decline). Unanswered, it is cancelled, as any question.

A waiting question never holds up the chat's commands (``beside_a_question`` in
``_commands``): one that only shows something runs at once; any other cancels the question
first (``cancelled_for``).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal

from ._links import check_link
from ._normalize import normalize

__all__ = [
    "ALWAYS",
    "NOTHING_TO_ANSWER",
    "NOTHING_TO_CANCEL",
    "QUESTION_TIMEOUT",
    "Answer",
    "Field",
    "FieldValue",
    "Question",
    "accepted",
    "answer_from_text",
    "cancelled_for",
    "field_value",
    "render_question",
    "shown",
]

QUESTION_TIMEOUT = 300.0
"""Seconds a question waits for its answer; unanswered, it is cancelled."""
NOTHING_TO_ANSWER: Final = "No question is waiting for an answer."
ALWAYS: Final = "always"
"""The value an accepted ``permission`` question carries (True) when the owner allowed the tool for good."""
NOTHING_TO_CANCEL: Final = "There is no question waiting to be cancelled."


def cancelled_for(name: str) -> str:
    """The one-line note that a waiting question was cancelled for the command ``/name``."""
    return f"The waiting question was cancelled, so that /{name} can run."


FieldValue = str | int | float | bool | list[str]
Action = Literal["accept", "decline", "cancel"]


@dataclass(frozen=True, slots=True)
class Field:
    """One value a question asks for."""

    name: str
    kind: Literal["string", "number", "integer", "boolean", "choice", "choices"]
    title: str = ""
    description: str = ""
    required: bool = False
    default: FieldValue | None = None
    options: tuple[str, ...] = ()
    """The allowed values of a ``choice`` or ``choices`` field."""


@dataclass(frozen=True, slots=True)
class Question:
    """A server's question: a form of fields, or a link to open (``url``) and nothing to fill in."""

    asker: str
    """Who asks (the server's name in the chat), shown with the question."""
    text: str
    fields: tuple[Field, ...] = ()
    url: str | None = None
    permission: bool = False
    """A call waiting for the owner's permission: asked of the owner alone, whoever's turn it is."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What the person answered; ``values`` only with ``accept``, already typed and complete."""

    action: Action
    values: Mapping[str, FieldValue] = field(default_factory=dict)

    def __repr__(self) -> str:
        # The values are the person's: they may be private, and are for the asking server only.
        return f"Answer({self.action!r}, {sorted(self.values)!r})"


CANCELLED = Answer("cancel")


def render_question(question: Question) -> str:
    """The question as text, each field with its kind and default, and how to answer."""
    if question.permission:
        return (
            f"{question.text}\n"
            "Answer /allow to allow this call, /allow always to allow every call of this tool, or /deny."
        )
    lines = [f"{question.asker} asks: {question.text}"]
    if question.url is not None:
        lines.append("It asks you to open this link (nothing was fetched from it):")
        lines.extend(check_link(question.url).lines())
        lines.append("Answer /accept if you will open it, /decline, or /cancel.")
        return "\n".join(lines)
    for item in question.fields:
        kind = f"one of {', '.join(item.options)}" if item.kind == "choice" else item.kind
        if item.kind == "choices":
            kind = f"some of {', '.join(item.options)}, comma separated"
        about = " — ".join(part for part in (item.title, item.description) if part)
        line = f"  {item.name} ({kind}{', required' if item.required else ''})"
        if item.default is not None:
            line += f", default {shown(item.default)}"
        lines.append(line + (f": {about}" if about else ""))
    if question.fields:
        lines.append(
            "Answer /accept [field=value …] (fields left out take their defaults), /decline, or /cancel."
        )
    else:
        lines.append("Answer /accept, /decline, or /cancel.")
    return "\n".join(lines)


def shown(value: FieldValue) -> str:
    """A value as a person reads it: yes or no, a comma-separated list, or the text."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return ",".join(value)
    return str(value)


def answer_from_text(question: Question, text: str) -> Answer | str:
    """The answer a line of text gives, or what is wrong with it (to show, then ask again)."""
    words = normalize(text).strip()
    command, _, rest = words.partition(" ")
    command = command.lower()
    if question.permission:
        return _permission_answer(command, rest)
    if command == "/decline":
        return Answer("decline")
    if command == "/cancel":
        return CANCELLED
    if command != "/accept":
        return "Answer /accept [field=value …], /decline or /cancel."
    try:
        pairs = shlex.split(rest)
    except ValueError as exc:
        return f"That answer cannot be read: {exc}."
    given: dict[str, str] = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals:
            return f"Write each value as field=value: {pair!r} has no '='."
        given[name.strip()] = value
    return typed_answer(question, given)


def _permission_answer(command: str, rest: str) -> Answer | str:
    if command == "/allow" and rest.strip().lower() in ("", "once", ALWAYS):
        return Answer("accept", {ALWAYS: True} if rest.strip().lower() == ALWAYS else {})
    if command == "/deny":
        return Answer("decline")
    if command == "/cancel":
        return CANCELLED
    return "Answer /allow, /allow always, or /deny."


def typed_answer(question: Question, given: Mapping[str, str]) -> Answer | str:
    """``accept`` with every field typed (defaults for those not given), or what is wrong."""
    known = {item.name: item for item in question.fields}
    unknown = sorted(set(given) - set(known))
    if unknown:
        return f"No field is named {', '.join(unknown)}; the fields are {', '.join(known) or 'none'}."
    values: dict[str, FieldValue] = {}
    for item in question.fields:
        if item.name in given:
            try:
                values[item.name] = field_value(item, given[item.name])
            except ValueError as problem:
                return str(problem)
    missing = accepted(question, values)
    if isinstance(missing, Field):
        return f"{missing.name} is required: /accept {missing.name}=…"
    return missing


def accepted(question: Question, values: Mapping[str, FieldValue]) -> Answer | Field:
    """``accept`` with ``values`` and the defaults of the fields left out, or the first required field missing.

    Left-out fields take their defaults (SEP-1034); one without a default is left out, unless it is required.
    """
    complete: dict[str, FieldValue] = {}
    for item in question.fields:
        if item.name in values:
            complete[item.name] = values[item.name]
        elif item.default is not None:
            complete[item.name] = item.default
        elif item.required:
            return item
    return Answer("accept", complete)


def field_value(item: Field, raw: str) -> FieldValue:
    """The value ``raw`` gives ``item``, typed.

    Raises:
        ValueError: ``raw`` is no value of the field; the message says what it takes.
    """
    raw = raw.strip()
    if item.kind == "boolean":
        lowered = raw.lower()
        if lowered in ("yes", "true", "y", "1", "on"):
            return True
        if lowered in ("no", "false", "n", "0", "off"):
            return False
        raise ValueError(f"{item.name} is yes or no, not {raw!r}.")
    if item.kind in ("number", "integer"):
        try:
            return int(raw) if item.kind == "integer" else float(raw)
        except ValueError:
            raise ValueError(
                f"{item.name} is a{'n integer' if item.kind == 'integer' else ' number'}, not {raw!r}."
            ) from None
    if item.kind == "choice":
        if raw not in item.options:
            raise ValueError(f"{item.name} is one of {', '.join(item.options)}.")
        return raw
    if item.kind == "choices":
        chosen = [part.strip() for part in raw.split(",") if part.strip()]
        wrong = [part for part in chosen if part not in item.options]
        if wrong:
            raise ValueError(f"{item.name} takes some of {', '.join(item.options)}; not {', '.join(wrong)}.")
        return chosen
    return raw
