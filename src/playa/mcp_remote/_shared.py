"""What the remote servers of one chat share: its credentials, its questions, its revocations.

``ChatServers`` makes one of each per chat; its servers and its parts are handed them.
"""

from __future__ import annotations

import logging

import anyio

from ..core import QUESTION_TIMEOUT, Answer, ChatSession, Question, Redactor
from ..core.secrets import MIN_SECRET_LENGTH, outbound_secrets
from .store import AuditLog, OAuthGrant
from .transport import Connector, Revocation, revoke

__all__ = ["Asker", "ChatSecrets", "Revoker"]

logger = logging.getLogger(__name__)


class ChatSecrets:
    """Every credential of one chat's servers, past and present, and the redactor made of them.

    The one owner of the chat's secrets: a server's entry, a login's grant and a registration's
    client secret are remembered here before anything can log them.
    """

    def __init__(self, session: ChatSession) -> None:
        self._session = session
        self.values: frozenset[str] = frozenset()
        """The same object until one is added."""
        self.redactor = Redactor.EMPTY

    def remember(self, values: frozenset[str]) -> None:
        # A removed server's values stay: they may still sit in an old result or error.
        secrets = self.values | values
        if secrets != self.values:
            self.values = frozenset(secrets)
            # Before anything can log them: a connect error may quote them at once. And before
            # the redactor: held, their forms are derived once for both.
            outbound_secrets().hold(self, self.values)
            self.redactor = Redactor(self.values)

    def release(self) -> None:
        """Nothing of this chat's is left to log its credentials."""
        outbound_secrets().release(self)

    def redact(self, text: str) -> str:
        return self.redactor.redact(text)

    def redact_out(self, text: str) -> str:
        """Text this extension keeps or shows: its own credentials and the host's removed."""
        if len(text) < MIN_SECRET_LENGTH:
            # No form of a secret is shorter (each redactor would return it as is): the audit
            # record's names and outcomes, several a call, skip the host's redactor lookup.
            return text
        text = self.redactor.redact(text)
        return self._session.redact(text) if self._session.redact is not None else text


class Asker:
    """A chat's one way to put a question: to the person whose message started the running turn."""

    def __init__(self, session: ChatSession, audit: AuditLog) -> None:
        self._session = session
        self._audit = audit
        self._asking = anyio.Lock()
        """One question at a time: the person answers them in turn."""

    async def server_question(self, question: Question) -> Answer:
        """A server's question, asked (``ask``) and recorded with how it was answered, never the values."""
        answer = await self.ask(question)
        sender = self._session.turn_sender
        self._audit.record(
            "question",
            server=question.asker,
            sender=sender.id if sender is not None else None,
            fields=len(question.fields),
            link=question.url is not None,
            answer=answer.action,
        )
        return answer

    async def ask(self, question: Question, timeout: float = QUESTION_TIMEOUT) -> Answer:
        """A question to the person whose message started the running turn (a ``permission``
        question: to the owner, through that turn's front end).

        Outside a turn nobody is waiting for the server, and nobody may be asked on the chat's
        behalf: the question is cancelled at once. Unanswered in time, it is cancelled too.
        """
        ui = self._session.turn_ui
        if ui is None:
            logger.info(
                "%s: a question from %s outside a turn was cancelled", self._session.scope, question.asker
            )
            return Answer("cancel")
        with anyio.move_on_after(timeout):
            async with self._asking:
                return await ui.question(question, timeout=timeout)
        return Answer("cancel")


class Revoker:
    """Revokes the OAuth grants a chat no longer uses (RFC 7009), bounded in time, and records it."""

    def __init__(self, scope: str, connector: Connector, audit: AuditLog) -> None:
        self._scope = scope
        self._connector = connector
        self._audit = audit

    async def revoke(self, grant: OAuthGrant) -> Revocation:
        """Revoke a grant's tokens; never raises for the server's failure."""
        async with await self._connector.login_client() as http:
            return await revoke(grant, http)

    async def replaced(self, name: str, grants: list[OAuthGrant], *, replaced_by: str = "login") -> str:
        """Revoke the grants a new one replaced; "" or a note for the owner when it failed.

        ``replaced_by`` (for the audit log): a new ``login``, or an ``entry`` that needs none.
        """
        notes: list[str] = []
        for grant in grants:
            revoked = await self.revoke(grant)
            logger.info("the replaced tokens of %s in %s: %s", name, self._scope, revoked.outcome)
            self._audit.record(
                "tokens_revoked",
                server=name,
                replaced_by=replaced_by,
                outcome=revoked.outcome,
                why=revoked.why or None,
            )
            if revoked.outcome == "failed":
                notes.append(
                    f" The previous login's tokens could not be revoked ({revoked.why}): they stay "
                    "valid until they expire, or until you revoke Playa's access at the authorization server."
                )
        return "".join(dict.fromkeys(notes))

    async def abandoned(self, name: str, grant: OAuthGrant) -> None:
        """Revoke the grant of an OAuth entry replaced by one that needs no login, once that connected."""
        try:
            await self.replaced(name, [grant], replaced_by="entry")
        except Exception as exc:  # boundary: this runs in the task group every chat of the host shares
            logger.warning("revoking the replaced tokens of %s failed: %s", name, type(exc).__name__)
