"""The Telegram front end (``playa telegram``), on python-telegram-bot v22.

One session per chat (scope ``telegram:<chat_id>``); the owner is the user of a private chat,
or the creator of a group. Long polling by default, a webhook as an option.
"""

from ._bot import ALLOWED_UPDATES, TelegramBot, run_telegram
from ._health import HEALTH_PATH, METRICS_PATH, PROBE_TIMEOUT, Operations
from ._journal import Journal, bot_id
from ._leases import LEASE_SECONDS, Leases
from ._notices import INTERRUPTED
from ._options import TelegramOptions, public_url_from, telegram_options
from ._outbox import RetryPolicy
from ._owner import ANONYMOUS_ADMIN_ID
from ._serving import Serving
from ._settings import TelegramSettings, build_bot
from ._split import MESSAGE_LIMIT, split_message, utf16_len
from ._webhook import SECRET_HEADER, RedirectRoute, WebhookConfig, webhook_secret

__all__ = [
    "ALLOWED_UPDATES",
    "ANONYMOUS_ADMIN_ID",
    "HEALTH_PATH",
    "INTERRUPTED",
    "LEASE_SECONDS",
    "MESSAGE_LIMIT",
    "METRICS_PATH",
    "PROBE_TIMEOUT",
    "SECRET_HEADER",
    "Journal",
    "Leases",
    "Operations",
    "RedirectRoute",
    "RetryPolicy",
    "Serving",
    "TelegramBot",
    "TelegramOptions",
    "TelegramSettings",
    "WebhookConfig",
    "bot_id",
    "build_bot",
    "public_url_from",
    "run_telegram",
    "split_message",
    "telegram_options",
    "utf16_len",
    "webhook_secret",
]
