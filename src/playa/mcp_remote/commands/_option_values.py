"""Values of ``/mcp_add``'s options that stand for a client or its credential: a client's id, and a
secret given now or asked in secret later (``--client-secret``, ``--client-key``, ``--id-token``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from ...exceptions import ValidationError

__all__ = ["client_id_of", "secret_option"]

T = TypeVar("T")


def client_id_of(value: str | None, problem: str) -> str:
    """A client's id as given (printable, no spaces, 256 characters at most); else ``problem``."""
    if not value or len(value) > 256 or not value.isprintable() or any(c.isspace() for c in value):
        raise ValidationError("oauth", problem)
    return value


def secret_option(
    flag: str, taken: bool, value: str | None, read: Callable[[str], T]
) -> tuple[T | None, bool]:
    """A secret option's value as ``read`` checks it, and whether it is to be asked in secret
    instead (given without a value): ``(value, False)`` or ``(None, True)``.

    ``taken``: the option was given before, which is refused.
    """
    if taken:
        raise ValidationError("oauth", f"{flag} is given twice")
    if value is None:
        return None, True
    return read(value), False
