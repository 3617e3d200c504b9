"""``PLAYA_DATABASE_URL``: where the database is, read once, its password kept out of every text.

The URL is parsed here, by Playa, into the driver's keyword arguments: the driver is never
handed the URL as a string, so none of its error messages can quote it. The password is a
credential: it is in no ``repr``, message or exception (``DatabaseUrl.shown`` is the URL
without it), and the log gate learns it the moment the URL is read (``outbound_secrets``), so
a library that logs it anyway logs ``[redacted]``.

Accepted: ``postgresql://user:password@host:port/database`` (or ``postgres://``), the user and
password percent-encoded where needed, an IPv6 host in brackets, and these query parameters:
``sslmode`` (disable, allow, prefer, require, verify-ca, verify-full), ``host`` (a Unix socket
folder, instead of the host part), ``application_name``, ``connect_timeout`` (seconds).
Anything else is refused with the parameter's name, never its value.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Literal, TypeAlias, TypedDict
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from ..core.secrets import MIN_SECRET_LENGTH, REDACTED, outbound_secrets
from ..exceptions import ConfigError

__all__ = ["DEFAULT_PORT", "ENV_DATABASE_URL", "SSL_MODES", "ConnectArguments", "DatabaseUrl", "database_url"]

ENV_DATABASE_URL: Final = "PLAYA_DATABASE_URL"
DEFAULT_PORT: Final = 5432
SslMode: TypeAlias = Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"]
SSL_MODES: Final[tuple[SslMode, ...]] = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
_SCHEMES: Final = ("postgresql", "postgres")
_PARAMETERS: Final = frozenset({"sslmode", "host", "application_name", "connect_timeout"})
_FIX: Final = f"set {ENV_DATABASE_URL} to postgresql://user:password@host:5432/database"


class ConnectArguments(TypedDict):
    """What the driver is given to connect, one argument each (never the URL as text)."""

    host: str
    port: int
    user: str
    password: str | None
    database: str
    ssl: SslMode | None
    server_settings: dict[str, str]


def _refuse(problem: str) -> ConfigError:
    return ConfigError(f"{ENV_DATABASE_URL} {problem}; {_FIX}")


@dataclass(frozen=True, kw_only=True)
class DatabaseUrl:
    """A parsed ``PLAYA_DATABASE_URL``: the driver's connection arguments, the password hidden."""

    host: str
    """A host name or address, or a Unix socket folder (starting with ``/``)."""
    port: int
    user: str
    password: str | None = field(default=None, repr=False)
    database: str
    sslmode: SslMode | None = None
    application_name: str = "playa"
    connect_timeout: float | None = None

    @classmethod
    def parse(cls, url: str) -> DatabaseUrl:
        """Read ``url``; raises ConfigError (never quoting the password) when it is not one.

        The password is given to the log gate before anything can fail on it.
        """
        try:
            parts = urlsplit(url.strip())
            password = unquote(parts.password) if parts.password is not None else None
        except ValueError:  # an unclosed IPv6 bracket: nothing reliable can be quoted
            raise _refuse("is not a URL") from None
        if password:
            # Before any check: a library may log the URL when this one fails.
            outbound_secrets().add([password, quote(password, safe="")])
        if parts.scheme not in _SCHEMES:
            raise _refuse(f"must start with postgresql:// (it starts with {parts.scheme or 'nothing'}://)")
        if password is not None and 0 < len(password) < MIN_SECRET_LENGTH:
            raise _refuse(
                f"has a password of {len(password)} characters: the log gate keeps only passwords of "
                f"{MIN_SECRET_LENGTH} or more out of the logs, so a shorter one is refused"
            )
        query = parse_qsl(parts.query, keep_blank_values=True)
        names = [name for name, _ in query]
        if unknown := sorted(set(names) - _PARAMETERS):
            raise _refuse(f"has parameters Playa does not take: {', '.join(unknown)}")
        if len(set(names)) != len(names):
            raise _refuse("repeats a parameter")
        options = dict(query)
        try:
            port = parts.port or DEFAULT_PORT
        except ValueError:
            raise _refuse("has a port that is not a number from 1 to 65535") from None
        host = options.get("host") or unquote(parts.hostname or "")
        if not host:
            raise _refuse("names no host")
        if "," in host:
            raise _refuse("names several hosts; Playa connects to one")
        path = parts.path.removeprefix("/")
        if not path or "/" in path:
            raise _refuse("names no database (the one part of the path after the host)")
        database = unquote(path)
        user = unquote(parts.username or "")
        if not user:
            raise _refuse("names no user")
        sslmode = options.get("sslmode")
        if sslmode is not None and sslmode not in SSL_MODES:
            raise _refuse(f"has sslmode={sslmode}; it must be one of {', '.join(SSL_MODES)}")
        return cls(
            host=host,
            port=port,
            user=user,
            password=password or None,
            database=database,
            sslmode=sslmode,
            application_name=options.get("application_name") or "playa",
            connect_timeout=_seconds(options.get("connect_timeout")),
        )

    @property
    def shown(self) -> str:
        """The URL as it may be shown and logged: the password replaced with ``[redacted]``."""
        user = quote(self.user, safe="") + (f":{REDACTED}" if self.password else "")
        database = quote(self.database, safe="")
        if self.host.startswith("/"):
            return f"postgresql://{user}@/{database}?host={self.host}"
        return f"postgresql://{user}@{self._host}:{self.port}/{database}"

    @property
    def where(self) -> str:
        """Server and database, for an error message: ``host:port/database`` or the socket folder."""
        if self.host.startswith("/"):
            return f"{self.host} (socket)/{self.database}"
        return f"{self._host}:{self.port}/{self.database}"

    @property
    def _host(self) -> str:
        return f"[{self.host}]" if ":" in self.host else self.host

    def connect_arguments(self) -> ConnectArguments:
        """The driver's keyword arguments for a connection to this database."""
        return {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "database": self.database,
            "ssl": self.sslmode,
            "server_settings": {"application_name": self.application_name},
        }

    def __str__(self) -> str:
        return self.shown


def _seconds(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        seconds = float(text)
    except ValueError:
        raise _refuse("has a connect_timeout that is not a number of seconds") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise _refuse("has a connect_timeout that is not a positive number of seconds")
    return seconds


def database_url(environ: Mapping[str, str] | None = None) -> DatabaseUrl | None:
    """``PLAYA_DATABASE_URL`` parsed, or None when it is unset or empty (the data dir then holds the state)."""
    text = (os.environ if environ is None else environ).get(ENV_DATABASE_URL, "").strip()
    return DatabaseUrl.parse(text) if text else None
