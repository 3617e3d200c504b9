"""Serving: how a bot is served, checked when it is made."""

from __future__ import annotations

import pytest

from playa.exceptions import ConfigError
from playa.telegram import RedirectRoute, Serving, WebhookConfig


async def _complete(query: str) -> str:
    return "done"


ROUTE = RedirectRoute(path="/oauth/callback", complete=_complete)


def test_a_login_redirect_with_long_polling_needs_a_listener_of_its_own() -> None:
    with pytest.raises(ConfigError, match="the login redirect has no address to listen on: set PLAYA_LISTEN"):
        Serving(redirect=ROUTE)


@pytest.mark.parametrize(
    "serving",
    [
        {"redirect": ROUTE, "listen": ("127.0.0.1", 0)},
        {"redirect": ROUTE, "webhook": WebhookConfig(url="https://bot.example.org/hook")},
        {},
    ],
    ids=["polling-with-listener", "webhook", "polling"],
)
def test_a_redirect_is_served_by_the_webhooks_listener_or_a_listener_of_its_own(
    serving: dict[str, object],
) -> None:
    made = Serving(**serving)  # type: ignore[arg-type]
    assert made.redirect is serving.get("redirect")


def test_its_repr_shows_no_webhook_secret() -> None:
    webhook = WebhookConfig(url="https://bot.example.org/hook")
    assert webhook.secret_token not in repr(Serving(webhook=webhook))
