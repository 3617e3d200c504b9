"""Credentials inside a server's URL: found, checked, and masked for everything that shows it.

Many hosted MCP servers take their key in the URL: ``?api_key=…``, a path segment, or
``https://TOKEN@host/``. Such a part is a credential like a header value: the real URL is kept
only inside the entry's seal and used only to connect; everything else (the file's visible
``url``, ``/mcp_list``, replies, the prompt) shows the masked one, and the values join the
chat's credentials, so they are redacted wherever they turn up.

What is secret:

- the userinfo (``user:password@``): the password, or the user when there is no password;
- a query value whose parameter is named like a credential (``key``, ``token``, ``api_key``,
  ``access_token``, ``sig``, ``password``, … case and ``-``/``_`` ignored);
- a query value or path segment shaped like a credential (a known key prefix, or long and
  random-looking);
- with ``--secret-url``, every path segment and query value: those shorter than the secret
  floor are masked but not redacted elsewhere (``mcp``, ``v1`` would mangle every text).

A secret found by name, by shape or in the userinfo must be at least ``MIN_SECRET_LENGTH``
characters: a shorter one could not be redacted safely, so the URL is refused, naming the part
and never quoting the value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote, unquote_plus, urlsplit, urlunsplit

from ...core import MIN_SECRET_LENGTH, REDACTED, looks_like_credential
from ...exceptions import ValidationError

__all__ = ["MaskedUrl", "mask_url"]

_SECRET_NAMES: Final = frozenset(
    {
        "key",
        "apikey",
        "xapikey",
        "token",
        "accesstoken",
        "authtoken",
        "apitoken",
        "privatetoken",
        "refreshtoken",
        "idtoken",
        "sessiontoken",
        "securitytoken",
        "bearer",
        "auth",
        "authorization",
        "secret",
        "clientsecret",
        "apisecret",
        "sig",
        "signature",
        "password",
        "passwd",
        "pwd",
        "accesskey",
        "secretkey",
        "credential",
        "credentials",
        "xamzsignature",
        "xamzcredential",
        "xamzsecuritytoken",
    }
)
_TOO_SHORT: Final = f"is shorter than {MIN_SECRET_LENGTH} characters, too short to be hidden safely"


@dataclass(frozen=True)
class MaskedUrl:
    """A URL as shown (credentials replaced by ``[redacted]``) and the credentials it holds."""

    shown: str
    secrets: frozenset[str]


def is_secret_name(name: str) -> bool:
    """Whether a query parameter's name says its value is a credential."""
    return unquote_plus(name).lower().replace("-", "").replace("_", "") in _SECRET_NAMES


def mask_url(url: str, *, secret_url: bool = False) -> MaskedUrl:
    """Find the credentials in ``url``; raises ``ValidationError`` for one that is too short.

    ``url`` is assumed to split (``ServerEntry`` checks that first).
    """
    parts = urlsplit(url)
    secrets: set[str] = set()
    masked = False

    def secret(raw: str, decoded: str, what: str, *, required: bool = True) -> None:
        if len(decoded) < MIN_SECRET_LENGTH:
            if required:
                raise ValidationError("url", f"{what} {_TOO_SHORT}; it holds a credential")
            return
        secrets.update(form for form in (raw, decoded) if len(form) >= MIN_SECRET_LENGTH)

    def hidden(raw: str, decoded: str, what: str) -> bool:
        """Whether a path segment or query value is masked: a credential, or the owner said so."""
        if looks_like_credential(decoded):
            secret(raw, decoded, what)
        elif secret_url:
            secret(raw, decoded, "", required=False)
        else:
            return False
        return True

    netloc = parts.netloc
    userinfo, at, hostport = netloc.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        if colon and password:
            secret(password, unquote(password), "the password in the URL")
            secret(user, unquote(user), "the user in the URL", required=False)
        elif user:
            secret(user, unquote(user), "the user part of the URL")
        netloc, masked = f"{REDACTED}@{hostport}", True

    segments = parts.path.split("/")
    for index, segment in enumerate(segments):
        if segment and hidden(segment, unquote(segment), f"path segment {index} of the URL"):
            segments[index], masked = REDACTED, True

    pairs = parts.query.split("&") if parts.query else []
    for index, pair in enumerate(pairs):
        name, eq, value = pair.partition("=")
        if not eq and looks_like_credential(unquote_plus(name)):
            secret(name, unquote_plus(name), f"query parameter {index + 1} of the URL")
            pairs[index], masked = REDACTED, True
            continue
        if not value:
            continue
        decoded = unquote_plus(value)
        if is_secret_name(name):
            shown = unquote_plus(name).lower()
            what = repr(shown) if len(shown) <= 32 else "named like a key"
            secret(value, decoded, f"the value of the URL's query parameter {what}")
        elif not hidden(value, decoded, f"query parameter {index + 1} of the URL"):
            continue
        pairs[index], masked = f"{name}{eq}{REDACTED}", True

    fragment = parts.fragment
    if fragment and (secret_url or looks_like_credential(unquote(fragment))):
        secret(fragment, unquote(fragment), "", required=False)
        fragment, masked = REDACTED, True
    if not masked:
        return MaskedUrl(url, frozenset())
    shown = urlunsplit((parts.scheme, netloc, "/".join(segments), "&".join(pairs), fragment))
    return MaskedUrl(shown, frozenset(secrets))
