"""A server's elicitation as a person's question, and the person's answer as the server's result.

``asking`` makes a connection's elicitation handler (``transport.Elicit``) that puts each
question to a person through ``Ask``; the transport itself knows no questions or answers.

Form mode becomes a ``Question`` of fields (the flat schema MCP allows: strings, numbers,
integers, booleans, single and multiple choice); URL mode a question with a link, never fetched
here, refused when too long to show whole (``host.check_link`` says what to show). What a server
wrote is redacted with the chat's credentials and cut before anyone sees it. A form that asks
for a password, a token or a key is refused without asking: the protocol reserves secrets for
URL mode, where they never pass through the client.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types

from ..core import Answer, Field, FieldValue, Question, check_link
from .transport import Elicit, Endpoint, redactor_of

__all__ = [
    "MAX_LINK_SHOWN",
    "MAX_TEXT",
    "Ask",
    "Refused",
    "asking",
    "credential_field",
    "elicit_result",
    "to_question",
]

logger = logging.getLogger(__name__)

Ask = Callable[[Question], Awaitable[Answer]]
"""Asks a person a server's question and returns the answer (``cancel`` when nobody can answer)."""

MAX_TEXT = 1000
MAX_LINK_SHOWN = 2500
"""UTF-16 units the link, its domain and its warnings may take as shown (``check_link``): the person
must read it whole, and one chat message holds it with the server's text."""
MAX_FIELD_TEXT = 200
MAX_FIELDS = 20
MAX_OPTIONS = 50

# Words that say a field wants a secret. Whole words only: "keyword" and "monkey" are fine.
_SECRET_WORDS = re.compile(
    r"(?<![a-z])(pass(word|phrase|code)?|pwd|pin|otp|token|secret|api[ _-]?key|key|credentials?|cvv|ssn)(?![a-z])",
    re.IGNORECASE,
)


def _words(text: str) -> str:
    # camelCase and snake_case names into words, so "apiKey" and "api_key" are both seen.
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", text).replace("_", " ")


# In a description, a secret word after one of these in its sentence is a warning, not a request:
# "do not give us your phone number, pin, or other sensitive info" (server-everything's form).
_NEGATION = re.compile(r"(?<![a-z])(not|never|no|don't|dont)(?![a-z])", re.IGNORECASE)
_SENTENCE_END = re.compile(r"[.;:!?\n]|(?<![a-z])(but|however|instead)(?![a-z])", re.IGNORECASE)


def credential_field(name: str, schema: Mapping[str, Any]) -> bool:
    """True when a form field asks for a password, token or key (by name, title, description or format).

    A name, a title or a format that says so is enough; a description must ask, not warn. No
    wording rule stops a server bent on asking for a key under another name: this one spares
    the person an honest server's mistake, and the answer still goes only to that server.
    """
    if schema.get("format") == "password" or schema.get("writeOnly") is True:
        return True
    if any(_SECRET_WORDS.search(_words(text)) for text in (name, str(schema.get("title", "")))):
        return True
    description = _words(str(schema.get("description", "")))
    for word in _SECRET_WORDS.finditer(description):
        starts = [end.end() for end in _SENTENCE_END.finditer(description, 0, word.start())]
        if not _NEGATION.search(description, starts[-1] if starts else 0, word.start()):
            return True
    return False


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _options(schema: Mapping[str, Any]) -> tuple[str, ...]:
    """The allowed values: ``enum``, or the titled ``oneOf``/``anyOf`` of ``const`` values."""
    if isinstance(enum := schema.get("enum"), list):
        return tuple(str(value) for value in enum[:MAX_OPTIONS])
    for key in ("oneOf", "anyOf"):
        if isinstance(choices := schema.get(key), list):
            return tuple(
                str(choice["const"])
                for choice in choices[:MAX_OPTIONS]
                if isinstance(choice, dict) and "const" in choice
            )
    return ()


def _field(name: str, schema: Mapping[str, Any], *, required: bool, redact: Callable[[str], str]) -> Field:
    kind = schema.get("type")
    options = _options(schema)
    default = schema.get("default")
    if kind == "array":
        items = schema.get("items")
        options = _options(items) if isinstance(items, dict) else ()
        field_kind: Any = "choices"
        default = [str(value) for value in default] if isinstance(default, list) else None
    elif options:
        field_kind = "choice"
    elif kind in ("number", "integer", "boolean"):
        field_kind = kind
    else:
        field_kind = "string"
    if default is not None and not isinstance(default, str | int | float | bool | list):
        default = None
    return Field(
        name=name,
        kind=field_kind,
        title=_cut(redact(str(schema.get("title", ""))), MAX_FIELD_TEXT),
        description=_cut(redact(str(schema.get("description", ""))), MAX_FIELD_TEXT),
        required=required,
        default=default,
        options=options,
    )


class Refused(Exception):
    """The server's question cannot be asked; ``reason`` says why, for the server and the person."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def to_question(server: str, params: mcp_types.ElicitRequestParams, redact: Callable[[str], str]) -> Question:
    """The question to show for an elicitation, redacted and cut.

    Raises:
        Refused: The form asks for a secret, or has a shape no person could fill in.
    """
    # Redacted whole, then cut: a cut first (or a slice to redact) could keep the head of a credential.
    text = _cut(redact(params.message), MAX_TEXT)
    if isinstance(params, mcp_types.ElicitRequestURLParams):
        url = redact(params.url)
        if len("\n".join(check_link(url).lines()).encode("utf-16-le")) // 2 > MAX_LINK_SHOWN:
            raise Refused("the link is too long to show whole")
        return Question(asker=server, text=text, url=url)
    schema = params.requested_schema
    properties = schema.get("properties", {})
    if not isinstance(properties, dict) or len(properties) > MAX_FIELDS:
        raise Refused(f"the form must have at most {MAX_FIELDS} fields")
    required = schema.get("required", [])
    required = set(required) if isinstance(required, list) else set()
    for name, field in properties.items():
        shown = [name, *_options(field if isinstance(field, dict) else {})]
        if any(redact(text) != text for text in shown):
            # Redacting them would change what the answer means to the server.
            raise Refused("a field's name or choices quote a credential")
    secrets = [
        name
        for name, field in properties.items()
        if credential_field(name, field if isinstance(field, dict) else {})
    ]
    if secrets:
        raise Refused(
            f"the form asks for a secret ({', '.join(_cut(redact(name), 64) for name in secrets)}): "
            "secrets are asked in URL mode, never in a form"
        )
    fields = tuple(
        _field(name, field if isinstance(field, dict) else {}, required=name in required, redact=redact)
        for name, field in properties.items()
    )
    return Question(asker=server, text=text, fields=fields)


def elicit_result(params: mcp_types.ElicitRequestParams, answer: Answer) -> mcp_types.ElicitResult:
    """The server's result for the person's answer; values only for an accepted form."""
    if answer.action != "accept" or isinstance(params, mcp_types.ElicitRequestURLParams):
        return mcp_types.ElicitResult(action=answer.action)
    content: dict[str, FieldValue | None] = dict(answer.values)
    return mcp_types.ElicitResult(action="accept", content=content)


def asking(endpoint: Endpoint, ask: Ask, redact: Callable[[str], str] | None = None) -> Elicit:
    """The elicitation handler of ``endpoint``'s connection: each question put to a person by ``ask``.

    ``redact`` cleans what the person is shown (default: the endpoint's own header values). A
    question no person could answer safely is refused without asking (see ``to_question``).
    """
    server = endpoint.server
    clean = redact if redact is not None else redactor_of(frozenset(endpoint.headers.values())).redact

    async def elicit(params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult | mcp_types.ErrorData:
        try:
            question = to_question(server, params, clean)
        except Refused as refused:
            logger.info("%s: a question was refused: %s", server, refused.reason)
            return mcp_types.ErrorData(code=mcp_types.INVALID_PARAMS, message=f"refused: {refused.reason}")
        return elicit_result(params, await ask(question))

    return elicit
