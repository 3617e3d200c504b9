"""OAuth 2.1 for a chat's remote servers, on the ``mcp`` SDK's client (``mcp.client.auth``).

The SDK speaks the protocol: discovery (RFC 9728, RFC 8414 and OpenID), registration
(pre-registered, metadata document first, dynamic as the fallback, with ``application_type``),
PKCE, ``state``, resource indicators, ``iss`` (RFC 9207), refresh, and credentials bound to the
issuer that registered them (SEP-2352). Playa adds DPoP (``_dpop``), the client-credentials
grant of machine clients (``_client_credentials``), and the binding of a client the owner
registered themselves to the first issuer it is used with, and supplies three things here:

- ``GrantStorage``: the SDK's ``TokenStorage`` over the chat's sealed entry. Every token and
  client secret is registered with the outbound gate before it is stored or used.
- ``ServerAuth``: the provider a *connection* uses. It never waits for a person: a token that
  expired is refreshed before the request, a 401 is answered with one refresh, and when no
  refresh can help the connect fails with ``needs_login`` set ("this server needs a login",
  or "authorization expired"), which the chat shows without a retry timer.
- ``LoginLink``: what a login (``ServerAuth`` with ``login``) needs of the person's side: sending
  the authorization link, and the code the redirect brings back. The redirect listener and its
  pending logins are the service's (``mcp_remote._callback_listener``), not the transport's.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncGenerator, Callable
from dataclasses import replace
from typing import Final, Protocol
from urllib.parse import urljoin, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.utils import (
    create_client_registration_request,
    extract_field_from_www_auth,
    extract_scope_from_www_auth,
    issuers_match,
    union_scopes,
)
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientMetadata,
)

from ... import __version__
from ..store import OAuthGrant
from ._client_credentials import client_credentials_request
from ._dpop import DPoPProofs
from ._enterprise import EnterpriseRefused, IdentityLeg, identity_leg
from ._errors import needs_scope, refused_although_granted
from ._grant_storage import GrantStorage, register_secrets
from ._oauth_codes import OAUTH_ERROR_CODES, error_code

__all__ = [
    "CALLBACK_PATH",
    "OAUTH_ERROR_CODES",
    "REFRESH_MARGIN",
    "GrantStorage",
    "LoginEnded",
    "LoginExpired",
    "LoginLink",
    "ServerAuth",
    "client_metadata",
    "client_metadata_document",
    "register_secrets",
    "token_auth_method",
]

logger = logging.getLogger(__name__)

REFRESH_MARGIN: Final = 60.0
"""A token is refreshed this many seconds before it expires, so no request carries a dying one."""
CALLBACK_PATH: Final = "/oauth/callback"

Clock = Callable[[], float]
_LOOPBACK: Final = ("127.0.0.1", "localhost", "::1")


def client_metadata(redirect_uri: str, *, scope: str | None = None) -> OAuthClientMetadata:
    """What Playa registers as (dynamic registration): a native client with a loopback redirect,
    a web client with the front end's public https one (SEP-837; OpenID Connect Registration 2)."""
    public = redirect_uri.startswith("https:") and urlsplit(redirect_uri).hostname not in _LOOPBACK
    return OAuthClientMetadata.model_validate(
        {
            "redirect_uris": [redirect_uri],
            "client_name": "Playa",
            "software_id": "playa",
            "software_version": __version__,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
            "application_type": "web" if public else "native",
            "scope": scope,
        }
    )


def client_metadata_document(url: str, *, port: int = 0, public_url: str | None = None) -> dict[str, object]:
    """Playa's client metadata document, to be served at ``url``, which is its ``client_id``.

    The redirect URIs are the console's loopback callback: on the fixed port when one is set,
    else without a port, which an authorization server must then accept on any (RFC 8252 §7.3);
    and with ``public_url`` the front end's, ``<public_url>/oauth/callback``.
    """
    loopback = f"http://127.0.0.1{f':{port}' if port else ''}{CALLBACK_PATH}"
    document = {"client_id": url, **client_metadata(loopback).model_dump(mode="json", exclude_none=True)}
    if public_url is not None:
        document["redirect_uris"] = [loopback, public_url.rstrip("/") + CALLBACK_PATH]
    return document


def token_auth_method(registered: str | None, supported: list[str] | None) -> str | None:
    """How a client with a secret authenticates at the token endpoint.

    The registration's method (a pre-registered client's is Playa's guess, basic) when the
    authorization server takes it; else the first of basic and post that it lists. A server
    that lists none takes basic (RFC 8414 2); one that takes neither keeps the registered
    method, and the server says what it makes of that.
    """
    offered = supported if supported is not None else ["client_secret_basic"]
    if registered in offered:
        return registered
    return next((m for m in ("client_secret_basic", "client_secret_post") if m in offered), registered)


class LoginEnded(Exception):
    """A login or a connect ended for a reason Playa tells the owner in its own words.

    Raised inside the SDK's auth flow, which logs every exception there as an ``ERROR`` with
    its traceback ("OAuth flow error"): for these expected ends (a server that needs a login or
    a scope, a link not used in time) that record is dropped (``_ExpectedEnds``).
    """


class LoginExpired(LoginEnded):
    """The owner did not finish the login in time (internal: becomes a message to the owner)."""


class _ExpectedEnds(logging.Filter):
    """Drops the SDK's "OAuth flow error" record of a ``LoginEnded``: no failure, and said otherwise."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, LoginEnded)


# Only on the SDK's OAuth flow logger, where the record is made: every other record stays.
logging.getLogger("mcp.client.auth.oauth2").addFilter(_ExpectedEnds())


class LoginLink(Protocol):
    """One login's person side: the authorization link goes out, the redirect's code comes back."""

    async def send_link(self, url: str) -> None:
        """Send the authorization link to the person who logs in."""

    async def result(self) -> AuthorizationCodeResult:
        """The code (and ``state``, ``iss``) the redirect brought; raises ``LoginExpired`` if none came in time."""
        ...

    def known(self, *values: str) -> None:
        """Secrets of this login, now known (the code, the PKCE verifier): to be redacted everywhere."""


class ServerAuth(OAuthClientProvider):
    """The OAuth provider of one server's connections, or of one login when ``login`` is given.

    Without ``login`` it never waits for a person (see the module docstring); ``needs_login``
    then says why a connect failed for want of one. With ``login`` (the owner's ``/mcp_auth``),
    the authorization link goes to ``login.send_link`` and the code comes from its callback.

    A connection makes one per connect: it refreshes on a 401 at most once.

    Step-up (a 403 ``insufficient_scope``): a connection cannot ask the owner, so it fails the
    request with ``needs_login`` naming the missing scopes and ``scope`` holding what the next
    login asks for: the scopes asked and granted before with the ones challenged (SEP-2350).
    A 403 for scopes the token already holds is the server's refusal, which no step-up changes:
    ``needs_login`` stays None, ``refused`` says why, and no login is started (the retry limit).

    ``on_refresh_failed`` hears of each refresh the authorization server refused (its HTTP
    status), before or after a 401: the chat records it in its audit log. It must not wait.
    """

    def __init__(
        self,
        server_url: str,
        storage: GrantStorage,
        *,
        redirect_uri: str,
        login: LoginLink | None = None,
        client_metadata_url: str | None = None,
        scope: str | None = None,
        clock: Clock = time.time,
        on_refresh_failed: Callable[[int], None] | None = None,
    ) -> None:
        """``scope``: for a login, scopes to ask for beyond those the server names (a step-up's)."""
        super().__init__(
            server_url,
            client_metadata(redirect_uri),
            storage,
            redirect_handler=login.send_link if login is not None else None,
            callback_handler=login.result if login is not None else None,
            client_metadata_url=client_metadata_url,
        )
        self._storage = storage
        self._login = login
        self._clock = clock
        self._on_refresh_failed = on_refresh_failed
        self._refreshing = False
        self._refreshed_on_401 = False
        self._insufficient_scope = False
        self._challenged: str | None = None
        self.scope = scope
        """The scopes the next login asks for besides those the server names, if any."""
        self.needs_login: str | None = None
        """Why the last connect failed for want of a person's login; None if it did not."""
        self.refused: str | None = None
        """Why the server refused a request (403) for scopes the token holds, or the authorization
        server a machine client's credentials; None if neither did."""
        self._dpop = DPoPProofs(storage.grant.dpop_key, clock=clock)
        self._leg: IdentityLeg | None = None

    @property
    def found_no_metadata(self) -> bool:
        """Whether discovery found neither protected resource nor authorization server metadata."""
        return self.context.protected_resource_metadata is None and self.context.oauth_metadata is None

    @property
    def grant(self) -> OAuthGrant:
        """The grant as stored now (it changes as tokens are refreshed)."""
        return self._storage.grant

    async def _initialize(self) -> None:
        await super()._initialize()
        # The SDK learns a token's expiry only when it receives it; a stored one would be sent
        # until a server refuses it. A grant knows when its token expires.
        grant = self._storage.grant
        if self.context.oauth_metadata is None and grant.metadata is not None:
            # The SDK discovers metadata only on a 401; a refresh before any request needs the
            # token endpoint that the login found.
            self.context.oauth_metadata = grant.metadata
            self.context.auth_server_url = grant.issuer
        expires_at = grant.expires_at
        if self.context.current_tokens is not None and expires_at is not None:
            self.context.token_expiry_time = expires_at - REFRESH_MARGIN

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """The SDK's flow, watching the answers to ``request`` itself (a 403 is no expired token),
        and registering a login's client for the scopes it will ask for."""
        flow = super()._auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                if self._storage.grant.machine and self._is_registration(outgoing):
                    # The SDK dropped the owner's client for another issuer: a machine cannot log
                    # in anew, and its credentials are not for that authorization server.
                    self.refused = _MOVED
                    raise _Refused(self.refused)
                if self.scope and self._login is not None and self._is_registration(outgoing):
                    # An authorization server may hold a client to the scopes it registered
                    # with (oidc-provider does): a step-up's scopes must be among them.
                    metadata = self.context.client_metadata
                    metadata.scope = union_scopes(metadata.scope, self.scope)
                    base = self.context.get_authorization_base_url(self.context.server_url)
                    outgoing = create_client_registration_request(self.context.oauth_metadata, metadata, base)
                response = yield outgoing
                if self._leg is not None and self._leg.owns(outgoing):
                    outgoing = await self._leg_step(response)
                    continue
                await self._dpop.saw(outgoing, response, resource=outgoing is request)
                if await self._dpop.nonce_asked(outgoing, response):
                    self._dpop.prove(outgoing)  # a fresh proof, with the server's nonce (RFC 9449 8, 9)
                    response = yield outgoing
                if outgoing is request:
                    self._insufficient_scope = (
                        response.status_code == 403
                        and extract_field_from_www_auth(response, "error") == "insufficient_scope"
                    )
                    self._challenged = (
                        extract_scope_from_www_auth(response) if self._insufficient_scope else None
                    )
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()

    def _is_registration(self, outgoing: httpx2.Request) -> bool:
        """Whether the SDK's flow is about to register the client (dynamic registration)."""
        metadata = self.context.oauth_metadata
        if metadata is not None and metadata.registration_endpoint is not None:
            endpoint = str(metadata.registration_endpoint)
        else:
            endpoint = urljoin(self.context.get_authorization_base_url(self.context.server_url), "/register")
        return outgoing.method == "POST" and str(outgoing.url) == endpoint

    async def _perform_authorization(self) -> httpx2.Request:
        if self._storage.grant.enterprise:
            return self._identity_leg()
        if self._storage.grant.machine:
            # A machine client needs nobody: a new token for the scopes now wanted.
            return await self._client_credentials()
        if self._login is not None:
            # What the server names now, with the scopes a request was refused for (SEP-2350).
            self.context.client_metadata.scope = union_scopes(self.context.client_metadata.scope, self.scope)
            return await super()._perform_authorization()
        if self._insufficient_scope:
            # The SDK chose the scopes to ask for: those asked and granted before, and the
            # challenged ones (or, with none named, the server's), with offline_access where
            # the authorization server offers it. A login helps if the token lacks one the
            # server needs; offline_access is the client's own wish, never what a server needs.
            wanted = self.context.client_metadata.scope
            tokens = self.context.current_tokens
            granted = set((tokens.scope or "").split()) if tokens is not None else set()
            needed = (self._challenged or wanted or "").split()
            missing = [scope for scope in needed if scope not in granted and scope != "offline_access"]
            if not missing:
                self.refused = refused_although_granted(
                    [scope for scope in needed if scope != "offline_access"]
                )
                raise _NeedsLogin(self.refused)
            self.scope = wanted
            self.needs_login = needs_scope(missing)
            raise _NeedsLogin(self.needs_login)
        # A 401 to a token that has not expired by the clock (revoked, or a server that keeps
        # shorter lifetimes): one refresh before asking a person.
        if not self._refreshed_on_401 and self.context.can_refresh_token():
            self._refreshed_on_401 = self._refreshing = True
            self._remember_metadata()
            return await self._refresh_token()
        had_tokens = self._storage.grant.tokens is not None
        self.needs_login = "authorization expired" if had_tokens else "this server needs a login"
        raise _NeedsLogin(self.needs_login)

    async def _handle_token_response(self, response: httpx2.Response) -> None:
        if self._refreshing:
            self._refreshing = False
            if await self._handle_refresh_response(response):
                return
            self.needs_login = "authorization expired"
            raise _NeedsLogin(self.needs_login)
        if self._storage.grant.machine and response.status_code in (400, 401):
            # The credentials themselves were refused: neither a timer nor a login helps. Only
            # an RFC 6749 error code is repeated, never the authorization server's own words.
            self.refused = "the authorization server refused the client's credentials" + error_code(
                await response.aread()
            )
            raise _Refused(self.refused)
        await super()._handle_token_response(await self._dpop_token_response(response))

    async def _handle_refresh_response(self, response: httpx2.Response) -> bool:
        ok = await super()._handle_refresh_response(await self._dpop_token_response(response))
        if not ok:
            logger.info(
                "refreshing a token for %s failed: HTTP %s", self.context.server_url, response.status_code
            )
            if self._on_refresh_failed is not None:
                self._on_refresh_failed(response.status_code)
        return ok

    async def _exchange_token_authorization_code(self, auth_code: str, code_verifier: str) -> httpx2.Request:
        # Both are credentials until the exchange is done, and after: a log line, an error or a
        # server's answer quoting the token request must not carry them. The verifier exists
        # only inside the SDK until now, and nobody else can know it before it is sent.
        if self._login is not None:
            self._login.known(auth_code, code_verifier)
        else:
            register_secrets((auth_code, code_verifier))
        self._remember_metadata()
        self._fit_token_auth()
        return self._prove_token_request(
            await super()._exchange_token_authorization_code(auth_code, code_verifier)
        )

    async def _refresh_token(self) -> httpx2.Request:
        self._fit_token_auth()
        return self._prove_token_request(await super()._refresh_token())

    async def _client_credentials(self) -> httpx2.Request:
        self._remember_metadata()
        self._fit_token_auth()
        grant = self._storage.grant
        request, assertion = await client_credentials_request(
            self.context, self._get_token_endpoint(), grant.client_key
        )
        if assertion is not None:
            self._storage.update(grant, assertion)
        return self._prove_token_request(request)

    def _identity_leg(self) -> httpx2.Request:
        """Enterprise-managed authorization: the IdP's requests first, then the ID-JAG to the
        authorization server the client is bound to (``_enterprise``)."""
        self._remember_metadata()
        self._fit_token_auth()
        self._leg = identity_leg(
            self.context,
            self._storage.grant,
            self._get_token_endpoint(),
            prove=self._prove_token_request,
            known=lambda jag: self._storage.update(self._storage.grant, jag),
        )
        return self._leg.first()

    async def _leg_step(self, response: httpx2.Response) -> httpx2.Request:
        assert self._leg is not None
        try:
            return await self._leg.step(response)
        except EnterpriseRefused as exc:
            self.refused = exc.reason
            raise _Refused(self.refused) from None

    def _select_authorization_server(self, advertised: list[str]) -> str:
        # The issuer the client is bound to, when the server still names it among others.
        client = self.context.client_info
        if client is not None and client.issuer:
            chosen = next(
                (server for server in advertised if issuers_match(server, client.issuer)), advertised[0]
            )
        else:
            chosen = super()._select_authorization_server(advertised)
        # Credentials are kept per issuer (SEP-2352): a server that names an authorization server
        # the client registered with before gets that registration again, not a new one.
        grant = self._storage.grant
        if (kept := grant.client_for(chosen)) is not None and kept is not client:
            self.context.client_info = kept
            self._storage.update(grant.with_client(kept))
        return chosen

    def _bind_issuer(self) -> None:
        """Bind a client that holds a credential to the first issuer it is used with (SEP-2352).

        A dynamic registration is bound by the SDK; a client the owner registered themselves is
        bound here, at its first token request. A server that names another authorization server
        later (hostile, or taken over) then gets no secret or signed assertion of the owner's.
        """
        client, metadata, grant = self.context.client_info, self.context.oauth_metadata, self._storage.grant
        if client is None or metadata is None or not (client.client_secret or grant.client_key):
            return
        issuer = str(metadata.issuer)
        if client.issuer is None:
            client.issuer = issuer
            self._storage.update(grant.with_client(client))
        elif not issuers_match(client.issuer, issuer):
            self.refused = _MOVED
            raise _Refused(self.refused)

    def _prove_token_request(self, request: httpx2.Request) -> httpx2.Request:
        """A token request carries a DPoP proof when both servers take DPoP tokens, or when the
        grant's tokens are bound (a refresh must prove the key they are bound to)."""
        metadata = self.context.oauth_metadata
        if (
            self._dpop.wanted(None if metadata is None else str(metadata.issuer))
            or self._storage.grant.dpop_bound
        ):
            if (secret := self._dpop.ensure_key()) is not None:
                self._storage.update(replace(self._storage.grant, dpop_key=secret))
            self._dpop.prove(request)
        return request

    def _add_auth_header(self, request: httpx2.Request) -> None:
        tokens = self.context.current_tokens
        if tokens is not None and self._storage.grant.dpop_bound and self._dpop.key is not None:
            # A DPoP-bound token goes with the DPoP scheme and a proof of its key (RFC 9449 7.1).
            request.headers["Authorization"] = f"DPoP {tokens.access_token}"
            self._dpop.prove(request)
            return
        super()._add_auth_header(request)

    async def _dpop_token_response(self, response: httpx2.Response) -> httpx2.Response:
        response, self._storage.dpop_bound = await self._dpop.token_response(response)
        return response

    def _fit_token_auth(self) -> None:
        """Send the client secret the way the authorization server's metadata says it takes it,
        to the issuer the client is bound to."""
        self._bind_issuer()
        client, metadata = self.context.client_info, self.context.oauth_metadata
        if client is not None and client.client_secret and metadata is not None:
            client.token_endpoint_auth_method = token_auth_method(
                client.token_endpoint_auth_method, metadata.token_endpoint_auth_methods_supported
            )

    def _remember_metadata(self) -> None:
        """Keep what discovery found with the tokens about to be stored (see ``_initialize``)."""
        metadata = self.context.oauth_metadata
        if metadata is not None:
            self._storage.grant = replace(self._storage.grant, metadata=metadata, issuer=str(metadata.issuer))


class _NeedsLogin(LoginEnded):
    """Raised inside the SDK's auth flow to end a connect that only a person can unblock."""


class _Refused(LoginEnded):
    """Raised inside the SDK's auth flow to end a connect that only the owner's new credentials can unblock."""


_MOVED: Final = (
    "the server now names another authorization server than the one its client was registered with"
)
