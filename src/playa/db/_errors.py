"""The one seam where the driver's exceptions become Playa's ``DatabaseError``.

asyncpg raises its own classes (one per SQLSTATE), ``OSError`` for the network and
``TimeoutError`` for its timeouts. Each becomes a ``DatabaseError`` with Playa's short reason
and the server named without the password, raised ``from None``: the driver's exception text
or arguments could quote what was sent, so the chain is cut here. The server's SQLSTATE
stays in ``sqlstate``: a transaction that lost a race (``retryable``) can be run again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Final

import asyncpg

from ..exceptions import DatabaseError

__all__ = ["translated"]

# Reasons by SQLSTATE, in Playa's words; the server's own text says nothing the operator needs
# more, and a class name is no explanation.
_REASONS: Final = {
    "28P01": "password authentication failed",
    "28000": "the server refused the login (pg_hba.conf or the user)",
    "3D000": "the database does not exist",
    "53300": "the server has too many connections",
    "57P03": "the server is starting up or shutting down",
    "55P03": "a lock was not granted in time",
    "57014": "the statement was cancelled (statement timeout)",
    "40001": "the transaction lost a race with another (serialization failure)",
    "40P01": "the transaction lost a race with another (deadlock)",
}


def _reason(exc: Exception) -> tuple[str, str | None]:
    if isinstance(exc, asyncpg.PostgresError):
        sqlstate = getattr(exc, "sqlstate", None)
        if sqlstate in _REASONS:
            return _REASONS[sqlstate], sqlstate
        # The primary message only: ``detail`` may quote row values.
        message = str(getattr(exc, "message", "") or type(exc).__name__).splitlines()[0][:300]
        return f"the server answered {sqlstate or 'an error'}: {message}", sqlstate
    if isinstance(exc, TimeoutError):
        return "timed out", None
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused", None
    if isinstance(exc, OSError):
        return f"cannot connect ({exc.strerror or type(exc).__name__})", None
    if isinstance(exc, asyncpg.InterfaceError):
        return "the connection was lost or misused by the client", None
    return f"the driver failed ({type(exc).__name__})", None


@contextlib.contextmanager
def translated(where: str) -> Iterator[None]:
    """Within, the driver's exceptions (and the network's) become ``DatabaseError``."""
    try:
        yield
    except DatabaseError:
        raise
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError) as exc:
        reason, sqlstate = _reason(exc)
        raise DatabaseError(reason, where=where, sqlstate=sqlstate) from None
