"""``/mcp_add``'s arguments: parsed and validated once into an :class:`AddRequest`, every rule
with one clear error, and whether a message of them carries a secret (:func:`carries_secret`)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from mcp.shared.auth import OAuthClientInformationFull

from ...core import MIN_SECRET_LENGTH, auth_credential, holds_key, is_http_token, looks_like_credential
from ...exceptions import UsageError, ValidationError
from ...mcp import server_name_problem
from ..store import (
    CLIENT_CREDENTIALS,
    DECISIONS,
    ENTERPRISE_GRANT,
    AuthKind,
    Decision,
    OAuthGrant,
    Policy,
    ServerEntry,
    TransportChoice,
    client_key_pem,
    decision_of,
    mask_url,
    resource_of,
)
from ._grant_options import ENTERPRISE_FLAGS, EnterpriseRequest, check_grant
from ._option_values import client_id_of, secret_option

__all__ = [
    "RESERVED_HEADERS",
    "USAGE",
    "AddRequest",
    "carries_secret",
    "check_secret",
    "client_key_of",
    "parse_add",
]


RESERVED_HEADERS: Final = frozenset(
    name.lower()
    for name in (
        "Host",
        "Content-Length",
        "Content-Type",
        "Content-Encoding",
        "Transfer-Encoding",
        "Accept",
        "Accept-Encoding",
        "Connection",
        "Keep-Alive",
        "Upgrade",
        "TE",
        "Trailer",
        "Expect",
        "Proxy-Authorization",
        "Proxy-Connection",
        "Mcp-Session-Id",
        "Mcp-Protocol-Version",
        "Last-Event-ID",
    )
)
"""Headers the HTTP and MCP transports set themselves; an owner's value would break or spoof them."""

_TRANSPORTS: Final[dict[str, TransportChoice]] = {
    "auto": "auto",
    "http": "streamable-http",
    "streamable-http": "streamable-http",
    "sse": "sse",
}
_FLAGS: Final = (
    "--transport",
    "--tools",
    "--bearer",
    "--header",
    "--secret-url",
    "--oauth",
    "--client-id",
    "--client-secret",
    "--client-key",
    "--grant",
    "--policy",
    *ENTERPRISE_FLAGS,
)
# Flags whose value is a credential, and that ask for it in secret when given none.
_SECRET_FLAGS: Final = ("--bearer", "--client-secret", "--client-key", "--id-token")
_GRANTS: Final = ("authorization-code", "client-credentials", "enterprise")
# An unknown option is quoted back only when it looks like a mistyped option, never like a key.
_SHOWN_OPTION = re.compile(r"--[a-z][a-z-]{0,14}")

_KEY_SHAPED: Final = (
    "{what} looks like a key (not repeated here), so nothing was saved; give {instead}, "
    "and a key only with --bearer or --header"
)

USAGE: Final = """\
/mcp_add <name> <url> [--transport auto|http|sse] [--tools a,b] [--bearer [TOKEN]] [--header "Name: value" | --header Name]… [--secret-url] [--oauth] [--client-id ID [--client-secret [SECRET] | --client-key [PEM]] [--grant client-credentials]] [--grant enterprise --idp URL [--idp-client-id ID] --id-token [TOKEN]] [--policy allow|ask|deny]
  name       1-32 characters: a lowercase letter, then lowercase letters, digits or '-'
  url        http:// or https://; a key in it is kept sealed and shown as [redacted]
  --bearer   sends Authorization: Bearer TOKEN; without TOKEN I ask for it in secret
  --header   sends a header; with a name alone I ask for its value in secret
  --tools    exposes only these tools of the server
  --secret-url  every path segment and query value of the URL is a secret (keys by name or
             shape, and user:password@, are found without it)
  --oauth    logs in with OAuth (also chosen by itself when the server asks for a login)
  --client-id, --client-secret   a client the authorization server knows already; without
             SECRET I ask for it in secret
  --grant client-credentials   the server serves machines: the client gets its own tokens
             with its secret, or with --client-key, no login needed
  --client-key   the client's private key (PEM) that signs its requests (private_key_jwt);
             without PEM I ask for it in secret (whole, or on one line)
  --grant enterprise   your identity provider (--idp, its issuer) vouches for you: your ID token
             there (without TOKEN I ask for it in secret) gets the client its tokens
  --policy   whether the agent may call its tools: allow, ask (you decide each call) or deny;
             /mcp_policy sets it per tool later
Adding a name that exists replaces it. A message that holds a credential is deleted."""


@dataclass(slots=True)
class AddRequest:
    """A parsed ``/mcp_add``. ``ask`` lists header names whose values are still to be asked, and
    ``ask_client_secret`` says the client secret is: the owner answers in secret (``ask_secrets``)."""

    name: str
    url: str
    transport: TransportChoice = "auto"
    tools: tuple[str, ...] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    bearer: bool = False
    ask: list[str] = field(default_factory=list)
    secret_url: bool = False
    oauth: bool = False
    client_id: str | None = None
    client_secret: str | None = None
    ask_client_secret: bool = False
    client_key: str | None = None
    ask_client_key: bool = False
    machine: bool = False
    """``--grant client-credentials``: a machine client, which needs no person's login."""
    enterprise: EnterpriseRequest | None = None
    """``--grant enterprise`` (SEP-990) and its options."""
    policy: Decision | None = None

    def __repr__(self) -> str:
        return f"AddRequest({self.name!r}, headers={sorted(self.headers)!r}, ask={self.ask!r}, oauth={self.oauth!r})"

    def entry(self) -> ServerEntry:
        """The entry this request saves, its credentials included (raises ``ValidationError`` like
        any entry): an OAuth login, the headers (one bearer token alone is ``bearer``), or none."""
        if self.oauth:
            grant = OAuthGrant(
                resource=resource_of(self.url),
                client=_preregistered(self),
                client_key=self.client_key,
                idp=self.enterprise.provider() if self.enterprise is not None else None,
            )
            return _entry(self, "oauth", oauth=grant)
        if self.headers:
            kind: AuthKind = "bearer" if self.bearer and len(self.headers) == 1 else "headers"
            return _entry(self, kind, self.headers)
        return _entry(self)


def _entry(
    request: AddRequest,
    auth_kind: AuthKind = "none",
    headers: Mapping[str, str] | None = None,
    oauth: OAuthGrant | None = None,
) -> ServerEntry:
    return ServerEntry(
        name=request.name,
        url=request.url,
        transport=request.transport,
        tools=request.tools,
        auth_kind=auth_kind,
        headers=headers or {},
        secret_url=request.secret_url,
        oauth=oauth,
        policy=Policy(request.policy),
    )


def _preregistered(request: AddRequest) -> OAuthClientInformationFull | None:
    """The client the owner registered with the authorization server themselves, if any."""
    if request.client_id is None:
        return None
    if request.machine or (request.enterprise is not None and request.enterprise.granted):
        return OAuthClientInformationFull(
            client_id=request.client_id,
            client_secret=request.client_secret,
            redirect_uris=None,
            grant_types=[CLIENT_CREDENTIALS if request.machine else ENTERPRISE_GRANT],
            token_endpoint_auth_method="private_key_jwt" if request.client_key else "client_secret_basic",
        )
    method = "client_secret_basic" if request.client_secret else "none"
    return OAuthClientInformationFull(
        client_id=request.client_id,
        client_secret=request.client_secret,
        token_endpoint_auth_method=method,
    )


def _split(args: str) -> list[str]:
    try:
        return shlex.split(args)
    except ValueError as exc:
        raise UsageError(f"I could not read the arguments ({exc}); check the quotes.") from None


def carries_secret(args: str) -> bool:
    """Whether ``/mcp_add`` arguments hold a credential (the message must then be deleted).

    Errs towards yes: a message deleted for nothing costs the owner a glance, a key left in
    the chat costs them the key.
    """
    try:
        words = shlex.split(args)
    except ValueError:
        # Unreadable: it may still hold a key, so treat it as if it did.
        return any(
            flag in args for flag in ("--bearer", "--header", "--client-secret", "--client-key", "--id-token")
        ) or any(map(looks_like_credential, args.split()))
    for i, word in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else None
        if word.startswith(("--bearer=", "--client-secret=", "--client-key=", "--id-token=")) or (
            word.startswith("--header=") and _header_holds_value(word[9:])
        ):
            return True
        if word in _SECRET_FLAGS and following is not None and not _is_flag(following):
            return True
        if word == "--header" and following is not None and _header_holds_value(following):
            return True
        if word.partition("=")[0] == "--secret-url":
            return True
        is_url = word.startswith(("http://", "https://"))
        if _url_holds_secret(word) if is_url else holds_key(word):
            return True
    # A flag inside another word (after an escaped space, in quotes) is no flag to the parser,
    # but what follows it may still be a key.
    secret_flags = ("--bearer", "--header", "--client-secret", "--client-key", "--id-token")
    flags = sum(word.partition("=")[0] in secret_flags for word in words)
    return sum(args.count(flag) for flag in secret_flags) > flags


def _url_holds_secret(word: str) -> bool:
    try:
        return mask_url(word).shown != word
    except ValidationError:
        return True  # refused for a credential too short to hide: a credential all the same
    except ValueError:
        # Not a URL that splits: judge its pieces by shape.
        return any(looks_like_credential(piece) for piece in re.split(r"[/?&=@:#;]", word))


def _header_holds_value(text: str) -> bool:
    # "Name: value", and also what is neither that nor a header name: "X-Api-Key KEY" (a
    # forgotten colon) or a bare key given where the name goes.
    return ":" in text or not is_http_token(text.strip()) or looks_like_credential(text.strip())


def _is_flag(word: str) -> bool:
    return word.partition("=")[0] in _FLAGS


def _looks_like_flag(word: str) -> bool:
    return word.startswith("--")


def parse_add(args: str) -> AddRequest:
    """Parse ``/mcp_add`` arguments, or raise ``UsageError`` saying what to fix."""
    words = _split(args)
    positional: list[str] = []
    options: list[tuple[str, str | None, int]] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("--"):
            flag, eq, inline = word.partition("=")
            if flag not in _FLAGS:
                shown = (
                    flag
                    if _SHOWN_OPTION.fullmatch(flag) and not looks_like_credential(flag[2:])
                    else f"at word {i + 1} (not repeated here: it may be a key)"
                )
                raise UsageError(f"unknown option {shown}. Options: {', '.join(_FLAGS)}")
            position = i + 1
            value: str | None = inline if eq else None
            # `--bearer` before the name and URL takes no value: `--bearer demo URL` asks.
            takes_next = flag not in ("--secret-url", "--oauth") and (
                flag not in _SECRET_FLAGS or len(positional) >= 2
            )
            following = words[i + 1] if i + 1 < len(words) else None
            # A token may itself start with "--" (base64url ones can): only a real flag ends --bearer.
            ends = _is_flag if flag in _SECRET_FLAGS else _looks_like_flag
            if value is None and takes_next and following is not None and not ends(following):
                value = words[i + 1]
                i += 1
            options.append((flag, value, position))
        else:
            positional.append(word)
        i += 1
    if len(positional) != 2:
        raise UsageError("usage: /mcp_add <name> <url> [options]; /mcp_add --help explains them")
    name, url = positional
    if (problem := server_name_problem(name)) is not None:
        raise ValidationError("name", problem)
    # Every value kept in clear (the name, tools, header names) or quoted back is checked by the
    # one classifier, and refused unquoted when it looks like a key. Not checked: the values that
    # are sealed (header values, the client secret, and the client id, which is sealed with the
    # grant and is often key-shaped: a UUID, or 32 random characters), and the URL, whose keys
    # the store finds by the same classifier and seals (its host is an address, not a key).
    # Asked here, not taken from the host's verdict on the message: these are the values as
    # the shell rules read them, quotes and escapes gone, which can join what the raw text split.
    if holds_key(name):
        raise ValidationError(
            "name", _KEY_SHAPED.format(what="the name", instead="a plain name such as docs")
        )
    request = AddRequest(name=name, url=url)
    for flag, value, position in options:
        _apply(request, flag, value, position)
    if (request.client_secret is not None or request.ask_client_secret) and request.client_id is None:
        raise ValidationError("oauth", "--client-secret goes with --client-id")
    check_grant(
        request.enterprise,
        machine=request.machine,
        client_id=request.client_id,
        has_secret=request.client_secret is not None or request.ask_client_secret,
        has_key=request.client_key is not None or request.ask_client_key,
    )
    if request.client_id is not None:
        request.oauth = True
    if request.oauth and (request.headers or request.ask):
        raise ValidationError("oauth", "--oauth logs in instead of sending headers: give one or the other")
    # The rules every stored entry obeys (the URL's among them) are checked now, so the owner
    # is never asked for a secret for an entry that could not be saved. Without its headers:
    # ``--secret-url`` must find a secret in the URL itself.
    entry = _entry(request)
    if request.secret_url and not entry.secrets:
        raise ValidationError(
            "url",
            f"--secret-url: no path segment or query value of the URL is {MIN_SECRET_LENGTH} characters "
            "or longer, so none could be hidden safely; send the key in a header instead",
        )
    return request


def _apply(request: AddRequest, flag: str, value: str | None, position: int) -> None:
    if flag == "--secret-url":
        if value is not None:
            raise ValidationError("url", f"the --secret-url at word {position} takes no value")
        request.secret_url = True
    elif flag == "--oauth":
        if value is not None:
            raise ValidationError("oauth", "--oauth takes no value")
        request.oauth = True
    elif flag == "--client-id":
        client_id = client_id_of(value, "--client-id takes the client's id (printable, no spaces)")
        if request.client_id is not None:
            raise ValidationError("oauth", "--client-id is given twice")
        request.client_id = client_id
    elif flag == "--client-secret":
        taken = request.client_secret is not None or request.ask_client_secret
        request.client_secret, request.ask_client_secret = secret_option(flag, taken, value, _client_secret)
    elif flag == "--client-key":
        taken = request.client_key is not None or request.ask_client_key
        request.client_key, request.ask_client_key = secret_option(flag, taken, value, client_key_of)
    elif flag == "--grant":
        if value not in _GRANTS:
            raise ValidationError("oauth", f"--grant takes {' or '.join(_GRANTS)}")
        request.machine = value == "client-credentials"
        request.enterprise = request.enterprise or EnterpriseRequest()
        request.enterprise.granted = value == "enterprise"
    elif flag in ENTERPRISE_FLAGS:
        request.enterprise = request.enterprise or EnterpriseRequest()
        request.enterprise.apply(flag, value)
    elif flag == "--policy":
        decision = decision_of(value or "")
        if decision is None:
            raise ValidationError("policy", f"--policy takes {', '.join(DECISIONS)}")
        request.policy = decision
    elif flag == "--transport":
        if value not in _TRANSPORTS:
            raise ValidationError("transport", "--transport takes auto, http or sse")
        request.transport = _TRANSPORTS[value]
    elif flag == "--tools":
        tools = tuple(t.strip() for t in (value or "").split(",") if t.strip())
        if not tools:
            raise ValidationError("tools", "--tools takes a comma-separated list of tool names")
        for number, tool in enumerate(tools, 1):
            if holds_key(tool):
                what = f"tool {number} of the --tools at word {position}"
                raise ValidationError("tools", _KEY_SHAPED.format(what=what, instead="the tool's name"))
        request.tools = tools
    elif flag == "--bearer":
        if request.bearer:
            raise ValidationError("bearer", "--bearer is given twice")
        request.bearer = True
        if value is None:
            _want(request, "Authorization")
        else:
            check_secret("the bearer token", value)
            _set(request, "Authorization", f"Bearer {value}")
    elif flag == "--header":
        _apply_header(request, value, f"the --header at word {position}")


def _client_secret(value: str) -> str:
    check_secret("the client secret", value)
    return value


def client_key_of(text: str) -> str:
    """The owner's private key as PEM, or a ``ValidationError`` that never quotes it."""
    try:
        return client_key_pem(text)
    except ValueError as exc:
        raise ValidationError("oauth", f"the client key is {exc}") from None


def _apply_header(request: AddRequest, value: str | None, where: str) -> None:
    """``--header "Name: value"`` sets a header; ``--header Name`` asks for its value later."""
    if value is None:
        raise ValidationError("header", '--header takes "Name: value", or a header name to be asked for')
    header, colon, header_value = value.partition(":")
    header = header.strip()
    if header.lower() in RESERVED_HEADERS:
        check_header_name(header, where)
    if holds_key(header):
        raise ValidationError(
            "header",
            f'{where} looks like a key, not a header name: give "Name: value", or a name alone to be asked for its value',
        )
    if not colon and not is_http_token(header):
        raise ValidationError(
            "header",
            f'{where} is neither "Name: value" nor a header name (a colon may be missing)',
        )
    check_header_name(header, where)
    if colon:
        header_value = header_value.strip()
        check_secret(f"the value of {header}", header_value)
        _set(request, header, header_value)
    else:
        _want(request, header)


def check_header_name(header: str, where: str = "a header") -> None:
    if not is_http_token(header):
        # Not quoted: what stands where the name goes may be a key.
        raise ValidationError(
            "header", f"{where} has no valid header name (letters, digits and -, no spaces)"
        )
    if header.lower() in RESERVED_HEADERS:
        raise ValidationError("header", f"{header} is set by the transport itself and cannot be given")


def check_secret(what: str, value: str) -> None:
    """Refuse header values that cannot be kept secret safely. The value is never quoted."""
    if any(c in value for c in "\r\n\0"):
        raise ValidationError("header", f"{what} must not contain line breaks")
    if len(value) < MIN_SECRET_LENGTH:
        raise ValidationError(
            "header",
            f"{what} is shorter than {MIN_SECRET_LENGTH} characters, too short to be hidden safely in tool results",
        )
    # The redactor also looks for the credential alone ("Bearer x" → "x"), so it must be as long.
    credential = auth_credential(value)
    if credential is not None and len(credential.strip()) < MIN_SECRET_LENGTH:
        raise ValidationError(
            "header",
            f"the credential after the scheme in {what} is shorter than {MIN_SECRET_LENGTH} characters, "
            "too short to be hidden safely in tool results",
        )


def _taken(request: AddRequest, header: str) -> bool:
    return header.lower() in {h.lower() for h in [*request.headers, *request.ask]}


def _set(request: AddRequest, header: str, value: str) -> None:
    if _taken(request, header):
        raise ValidationError("header", f"{header} is given twice")
    request.headers[header] = value


def _want(request: AddRequest, header: str) -> None:
    if _taken(request, header):
        raise ValidationError("header", f"{header} is given twice")
    request.ask.append(header)
