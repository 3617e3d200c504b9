"""How the bot reaches the Bot API and how it polls, waits and retries."""

from __future__ import annotations

from dataclasses import dataclass, field

from telegram import Bot
from telegram.request import HTTPXRequest

from ..core import MAX_ATTACHMENT, check_at_least
from ..exceptions import ConfigError
from ._bounds import check_seconds
from ._leases import LEASE_SECONDS
from ._outbox import RetryPolicy
from ._owner import OWNER_TTL

__all__ = ["TelegramSettings", "build_bot"]


@dataclass(frozen=True, kw_only=True)
class TelegramSettings:
    """How the bot polls, waits and retries; the defaults suit the public Bot API."""

    poll_timeout: float = 30.0
    """How long one ``getUpdates`` long poll may be held by Telegram."""
    owner_ttl: float = OWNER_TTL
    """How long a group's creator is remembered before it is asked again."""
    typing_interval: float = 4.0
    """Telegram shows "typing…" for 5 s, so it is repeated a little sooner while a turn runs."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_queued: int = 50
    """Messages that may wait in one chat's queue; more are refused with a note."""
    stop_grace: float = 30.0
    """On a stop, how long running turns may go on; those still running are reported after the restart."""
    max_file: int = MAX_ATTACHMENT
    """Bytes of a photo or document a person sends that the bot takes into the chat's workspace."""
    lease_seconds: float = LEASE_SECONDS
    """With a database: how long a chat stays with a process that stopped renewing its lease
    (``PLAYA_LEASE_SECONDS``); renewed every third of it."""

    def __post_init__(self) -> None:
        for name in ("poll_timeout", "owner_ttl", "stop_grace"):
            check_seconds(self, name, positive=False)
        check_seconds(self, "typing_interval", positive=True)
        check_seconds(self, "lease_seconds", positive=True)
        check_at_least(self, max_queued=1)
        if (
            not isinstance(self.max_file, int)
            or isinstance(self.max_file, bool)
            or not 0 < self.max_file <= MAX_ATTACHMENT
        ):
            raise ConfigError(
                f"TelegramSettings.max_file must be a whole number of bytes from 1 to {MAX_ATTACHMENT}, "
                f"got {self.max_file!r}"
            )
        if not isinstance(self.retry, RetryPolicy):
            raise ConfigError(
                f"TelegramSettings.retry must be a RetryPolicy, got {type(self.retry).__name__}"
            )


def build_bot(token: str, *, base_url: str | None = None, poll_timeout: float = 30.0) -> Bot:
    """A PTB ``Bot`` for ``token``; ``base_url`` points it at a local Bot API server (or a fake one).

    ``base_url`` is the API root, like ``http://127.0.0.1:8081``; the ``/bot<token>`` and
    ``/file/bot<token>`` paths are added here.
    """
    if not token:
        raise ConfigError("set TELEGRAM_BOT_TOKEN to the token @BotFather gave you")
    root = (base_url or "https://api.telegram.org").rstrip("/")
    return Bot(
        token,
        base_url=f"{root}/bot",
        base_file_url=f"{root}/file/bot",
        # Chats run concurrently and each may be sending or deleting: PTB's default pool of one
        # connection would queue them all behind each other.
        request=HTTPXRequest(connection_pool_size=64, read_timeout=30.0, pool_timeout=10.0),
        get_updates_request=HTTPXRequest(connection_pool_size=1, read_timeout=poll_timeout + 10.0),
    )
