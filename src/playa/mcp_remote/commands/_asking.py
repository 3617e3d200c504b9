"""Asking the owner, in secret, for the credentials an ``/mcp_add`` left out (``--bearer`` alone,
``--header Name``, ``--client-secret``, ``--client-key`` or ``--id-token`` alone): the last step of parsing the request."""

from __future__ import annotations

from ...core import UI
from ._add_request import AddRequest, check_secret, client_key_of
from ._grant_options import check_id_token

__all__ = ["ask_secrets"]

_NO_ANSWER = "No answer came, so nothing was saved."


async def ask_secrets(request: AddRequest, ui: UI) -> str | None:
    """Fill ``request`` with the owner's secret answers; the refusal to reply with, or None once
    every value came and passed the rules an inline value passes (``check_secret``)."""
    for header in request.ask:
        bearer = header == "Authorization" and request.bearer
        what = "the bearer token" if bearer else f"the value of the {header} header"
        answer = await _ask(ui, f"Send {what} for {request.name}.")
        if not answer:
            return _NO_ANSWER
        if bearer and answer[:7].lower() == "bearer ":
            answer = answer[7:].strip()
        check_secret(what, answer)
        # A sentence sent while the question waited is not a secret: a token is one word, a
        # header value at most two (an auth scheme and its credential).
        if len(answer.split()) > (1 if bearer else 2):
            shape = "a token (it has spaces)" if bearer else "a header value (it reads like a sentence)"
            return f"That is not {shape}, so nothing was saved. Try /mcp_add again."
        request.headers[header] = f"Bearer {answer}" if bearer else answer
    request.ask = []
    if request.ask_client_secret:
        answer = await _ask(ui, f"Send the client secret for {request.name}.")
        if not answer:
            return _NO_ANSWER
        check_secret("the client secret", answer)
        if len(answer.split()) != 1:
            return "That is not a client secret (it has spaces), so nothing was saved. Try /mcp_add again."
        request.client_secret, request.ask_client_secret = answer, False
    if request.ask_client_key:
        answer = await _ask(
            ui,
            f"Send the private key (PEM) of the client for {request.name}: the whole key in one "
            "message, or on one line (tr -d '\\n' < key.pem).",
        )
        if not answer:
            return _NO_ANSWER
        request.client_key, request.ask_client_key = client_key_of(answer), False
    if (enterprise := request.enterprise) is not None and enterprise.ask_id_token:
        answer = await _ask(ui, f"Send your ID token from {enterprise.idp} for {request.name}.")
        if not answer:
            return _NO_ANSWER
        enterprise.id_token, enterprise.ask_id_token = check_id_token(answer), False
    return None


async def _ask(ui: UI, question: str) -> str | None:
    return await ui.ask(
        f"{question} It stays out of the conversation, and I delete your message.", secret=True
    )
