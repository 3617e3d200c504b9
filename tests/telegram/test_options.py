"""How the bot is set up: its settings, its token, the webhook's secret, and where logins redirect."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

import anyio
import httpx
import pytest

from playa.exceptions import ConfigError
from playa.telegram import (
    SECRET_HEADER,
    RetryPolicy,
    TelegramSettings,
    WebhookConfig,
    run_telegram,
    telegram_options,
)
from servers.python_servers import serve_asgi
from support.host import new_host
from support.telegram import TOKEN, running_bot

from .fake_bot_api import FakeBotApi, private_chat, user


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: TelegramSettings(poll_timeout=-1), "TelegramSettings.poll_timeout"),
        (lambda: TelegramSettings(typing_interval=0), "TelegramSettings.typing_interval"),
        (lambda: TelegramSettings(stop_grace=float("nan")), "TelegramSettings.stop_grace"),
        (lambda: TelegramSettings(max_queued=0), "TelegramSettings.max_queued"),
        (lambda: TelegramSettings(owner_ttl=float("inf")), "TelegramSettings.owner_ttl"),
        (lambda: RetryPolicy(attempts=0), "RetryPolicy.attempts"),
        (lambda: RetryPolicy(backoff=0), "RetryPolicy.backoff"),
        (lambda: RetryPolicy(backoff=5, backoff_max=1), "RetryPolicy.backoff"),
        (lambda: RetryPolicy(deadline=-1), "RetryPolicy.deadline"),
    ],
)
def test_bad_telegram_settings_are_refused_at_construction_naming_the_field(
    build: Callable[[], object], field: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        build()
    assert str(caught.value).startswith(field + " ")


@pytest.mark.anyio
async def test_a_refused_token_stops_the_bot_with_a_config_error_that_does_not_show_it(
    tmp_path: Path,
) -> None:
    fake = FakeBotApi("999:another-bots-token-entirely-0123456789")
    async with serve_asgi(fake.app()) as api, new_host(tmp_path) as host:
        with anyio.fail_after(10), pytest.raises(ConfigError) as caught:
            await run_telegram(host, token=TOKEN, base_url=api.url)
    assert "refused the bot token" in str(caught.value)
    assert TOKEN not in str(caught.value)
    assert [(c.method, c.status) for c in fake.calls] == [("getMe", 401)]


@pytest.mark.anyio
async def test_a_webhook_takes_updates_only_with_the_secret_token(tmp_path: Path) -> None:
    ports: list[int] = []
    webhook = WebhookConfig(url="https://bot.example.org/hook", listen="127.0.0.1", port=0)
    async with running_bot(tmp_path, webhook=webhook, listening=ports.append) as bot:
        fake = bot.fake
        registered = await fake.wait_call("setWebhook")
        assert registered.params["url"] == "https://bot.example.org/hook"
        secret = registered.params["secret_token"]
        assert not fake.find("getUpdates")
        update = {
            "update_id": 1,
            "message": {
                "message_id": 5,
                "date": 0,
                "chat": private_chat(1201),
                "from": user(1201),
                "text": "/help",
            },
        }
        url = f"http://127.0.0.1:{ports[0]}/hook"
        async with httpx.AsyncClient(trust_env=False) as client:
            forged = await client.post(url, json=update, headers={SECRET_HEADER: "wrong"})
            accepted = await client.post(url, json=update, headers={SECRET_HEADER: secret})
        assert forged.status_code == 403
        assert accepted.status_code == 200
        await fake.wait_reply(1201, "Commands:")
        assert len(fake.texts(1201)) == 1


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"PLAYA_PUBLIC_URL": "https://bot.example.org", "PLAYA_LISTEN": "127.0.0.1"},
            "PLAYA_LISTEN (--listen) must be HOST:PORT",
        ),
        (
            {"PLAYA_PUBLIC_URL": "https://bot.example.org", "PLAYA_LISTEN": "127.0.0.1:99999"},
            "PLAYA_LISTEN (--listen) must be HOST:PORT",
        ),
        (
            {
                "PLAYA_PUBLIC_URL": "https://bot.example.org",
                "PLAYA_LISTEN": "127.0.0.1:8080",
                "PLAYA_TELEGRAM_WEBHOOK_URL": "https://b.example/h",
            },
            "PLAYA_LISTEN (--listen) is for long polling",
        ),
        (
            {
                "PLAYA_PUBLIC_URL": "https://u:p@bot.example.org",
                "PLAYA_TELEGRAM_WEBHOOK_URL": "https://b.example/h",
            },
            "no credentials, query or fragment",
        ),
        (
            {
                "PLAYA_PUBLIC_URL": "ftp://bot.example.org",
                "PLAYA_TELEGRAM_WEBHOOK_URL": "https://b.example/h",
            },
            "must be an http(s) URL",
        ),
    ],
)
def test_a_public_url_that_cannot_serve_the_login_redirect_is_a_clear_error(
    env: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        telegram_options(argparse.Namespace(), {"TELEGRAM_BOT_TOKEN": TOKEN, **env})
    assert message in str(caught.value)
    assert "u:p" not in str(caught.value)


def test_a_public_url_without_the_webhook_is_served_on_a_listener_of_its_own() -> None:
    environ = {"TELEGRAM_BOT_TOKEN": TOKEN, "PLAYA_PUBLIC_URL": "https://bot.example.org/playa"}
    options = telegram_options(argparse.Namespace(), environ)
    assert options.webhook is None and options.public_url == "https://bot.example.org/playa"
    assert options.listen == ("127.0.0.1", 8443)
    options = telegram_options(argparse.Namespace(), {**environ, "PLAYA_LISTEN": "[::1]:9000"})
    assert options.listen == ("::1", 9000)
    flagged = telegram_options(argparse.Namespace(listen="0.0.0.0:8080"), {**environ, "PLAYA_LISTEN": "x"})
    assert flagged.listen == ("0.0.0.0", 8080)


def test_a_listen_address_alone_gives_long_polling_a_listener_for_health_and_metrics() -> None:
    environ = {"TELEGRAM_BOT_TOKEN": TOKEN, "PLAYA_LISTEN": "127.0.0.1:9100"}
    options = telegram_options(argparse.Namespace(), environ)
    assert options.listen == ("127.0.0.1", 9100) and options.public_url is None
    assert telegram_options(argparse.Namespace(), {"TELEGRAM_BOT_TOKEN": TOKEN}).listen is None


def test_a_public_url_with_the_webhook_is_where_logins_redirect() -> None:
    options = telegram_options(
        argparse.Namespace(),
        {
            "TELEGRAM_BOT_TOKEN": TOKEN,
            "PLAYA_PUBLIC_URL": "https://bot.example.org/playa",
            "PLAYA_TELEGRAM_WEBHOOK_URL": "https://bot.example.org/playa/hook",
        },
    )
    assert options.public_url == "https://bot.example.org/playa"
    assert options.webhook is not None and options.webhook.url == "https://bot.example.org/playa/hook"
