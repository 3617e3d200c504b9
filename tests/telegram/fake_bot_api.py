"""A fake Telegram Bot API on loopback: it speaks the methods Playa's bot uses and records every call.

Tests inject updates (``send``) and wait, bounded, for the bot's calls (``wait_call``)::

    fake = FakeBotApi(TOKEN)
    async with serve_asgi(fake.app()) as served:      # served.url is the Bot API root
        message_id = fake.send(private_chat(7), "/help", sender=user(7))
        reply = await fake.wait_call("sendMessage", chat_id=7)

``getUpdates`` long-polls: it answers at once when updates are queued, else holds until one is
injected or its timeout (capped by ``max_hold``) passes.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import anyio
import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

__all__ = ["ANONYMOUS_ADMIN", "ApiCall", "FakeBotApi", "group_chat", "private_chat", "user"]

BOT_USER = {
    "id": 4242,
    "is_bot": True,
    "first_name": "Playa",
    "username": "playa_test_bot",
    "can_join_groups": True,
    "can_read_all_group_messages": False,
    "supports_inline_queries": False,
}
ANONYMOUS_ADMIN = {"id": 1087968824, "is_bot": True, "first_name": "Group", "username": "GroupAnonymousBot"}
# Parameters that PTB sends as plain strings, never JSON-encoded.
_RAW = frozenset({"text", "url", "secret_token", "action", "caption"})
_WAIT_TIMEOUT = 10.0


def user(user_id: int, name: str = "User") -> dict[str, Any]:
    return {"id": user_id, "is_bot": False, "first_name": f"{name}{user_id}"}


def private_chat(user_id: int) -> dict[str, Any]:
    return {"id": user_id, "type": "private", "first_name": f"User{user_id}"}


def basic_group(chat_id: int) -> dict[str, Any]:
    """A basic group: what a group is before Telegram upgrades it to a supergroup."""
    return {"id": chat_id, "type": "group", "title": "G"}


def group_chat(chat_id: int, title: str = "Group", *, forum: bool = False) -> dict[str, Any]:
    chat: dict[str, Any] = {"id": chat_id, "type": "supergroup", "title": title}
    if forum:
        chat["is_forum"] = True
    return chat


@dataclass(frozen=True)
class ApiCall:
    """One request the bot made: method, decoded parameters, the HTTP status answered, and when."""

    method: str
    params: dict[str, Any]
    status: int
    at: float
    result_id: int | None = None
    """The message id the fake gave a sent message."""

    @property
    def chat_id(self) -> Any:
        return self.params.get("chat_id")

    @property
    def text(self) -> str:
        return str(self.params.get("text", ""))

    @property
    def labels(self) -> list[str]:
        """The labels of the message's inline buttons, row by row."""
        markup = self.params.get("reply_markup") or {}
        return [button["text"] for row in markup.get("inline_keyboard", []) for button in row]


@dataclass
class FakeBotApi:
    """The fake server's state; ``app()`` is the ASGI app that serves it."""

    token: str
    calls: list[ApiCall] = field(default_factory=list)
    administrators: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    fail_delete: bool = False
    retry_after: dict[str, int] = field(default_factory=dict)
    """Method → seconds: the next call of that method is answered 429 with this retry_after."""
    flood: dict[int, int] = field(default_factory=dict)
    """Chat → seconds: every sendMessage to that chat is answered 429 while it is set."""
    server_errors: dict[str, int] = field(default_factory=dict)
    """Method → count: that many next calls of the method are answered 502."""
    reject_entities: bool = False
    """Answer 400 "can't parse entities" to a sendMessage with entities, as Telegram does for bad ones."""
    reject_button_urls: bool = False
    """Answer 400 "BUTTON_URL_INVALID" to a message with a URL button, as Telegram does for a URL it refuses."""
    max_hold: float = 2.0
    no_private_chat: set[int] = field(default_factory=set)
    """Users who never started a private chat with the bot: a message to them is refused (403)."""
    privacy_mode: bool = False
    """Telegram's default for bots: in groups, only commands and replies to the bot's messages reach it."""
    edit_every: float = 0.0
    """Seconds Telegram wants between two edits (``editMessageText``), or two drafts
    (``sendMessageDraft``), in one chat: one sooner is answered 429 with the wait left, rounded up."""
    files: dict[str, bytes] = field(default_factory=dict)
    """File id → bytes: what ``getFile`` and the file download serve (``send_file`` adds to it)."""
    _updates: list[dict[str, Any]] = field(default_factory=list)
    _update_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _message_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1000))
    _chats: dict[int, dict[str, Any]] = field(default_factory=dict)
    _queued: anyio.Event = field(default_factory=anyio.Event)
    _recorded: anyio.Event = field(default_factory=anyio.Event)
    _closing: bool = False
    webhook: dict[str, Any] | None = None
    """The ``setWebhook`` parameters while a webhook is set: then ``post_to_webhook`` delivers updates."""
    proxy: str | None = None
    """Where ``post_to_webhook`` posts instead of the registered URL, as a reverse proxy forwards."""

    def close(self) -> None:
        """Answer held and future polls at once, so that the server can stop without waiting."""
        self._closing = True
        self._queued.set()

    # Injecting

    def push(self, update: dict[str, Any]) -> int:
        """Queue a raw update (``update_id`` is added); returns its id."""
        update_id = next(self._update_ids)
        self._updates.append({"update_id": update_id, **update})
        self._queued.set()
        self._queued = anyio.Event()
        return update_id

    def send(
        self,
        chat: dict[str, Any],
        text: str,
        *,
        sender: dict[str, Any] | None,
        sender_chat: dict[str, Any] | None = None,
        kind: str = "message",
        thread_id: int | None = None,
        message_id: int | None = None,
        extra: dict[str, Any] | None = None,
        reply_to: ApiCall | None = None,
    ) -> int:
        """A user's text message in ``chat``; returns its message id. ``kind``: message, edited_message, channel_post.

        ``thread_id`` puts it in a forum topic; ``message_id`` reuses an id (an edit of that message);
        ``reply_to`` makes it a reply to a message the bot sent. With ``privacy_mode``, a group
        message that is neither a command nor a reply to the bot is not given to the bot.
        """
        self._chats[chat["id"]] = chat
        message_id = message_id if message_id is not None else next(self._message_ids)
        message: dict[str, Any] = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": chat,
            "text": text,
            **(extra or {}),
        }
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
        if sender is not None:
            message["from"] = sender
        if sender_chat is not None:
            message["sender_chat"] = sender_chat
        if kind == "edited_message":
            message["edit_date"] = int(time.time())
        if reply_to is not None:
            message["reply_to_message"] = {
                "message_id": reply_to.result_id,
                "date": 0,
                "chat": chat,
                "from": BOT_USER,
                "text": reply_to.text,
            }
        seen = (
            not self.privacy_mode or chat["type"] == "private" or text.startswith("/") or reply_to is not None
        )
        if seen:
            self.push({kind: message})
        return message_id

    def send_file(
        self,
        chat: dict[str, Any],
        data: bytes,
        *,
        sender: dict[str, Any],
        name: str | None = None,
        mime_type: str | None = None,
        caption: str | None = None,
        photo: bool = False,
        size: int | None = None,
    ) -> int:
        """A user's photo (``photo``) or document in ``chat``, its bytes served by ``getFile`` and the
        file download; returns its message id. ``size`` is the size Telegram states (default: the real one)."""
        file_id = f"file{len(self.files) + 1}"
        self.files[file_id] = data
        stated = len(data) if size is None else size
        extra: dict[str, Any] = {}
        if photo:
            small = {
                "file_id": f"{file_id}s",
                "file_unique_id": "s",
                "width": 90,
                "height": 90,
                "file_size": 10,
            }
            big = {
                "file_id": file_id,
                "file_unique_id": "b",
                "width": 800,
                "height": 600,
                "file_size": stated,
            }
            extra["photo"] = [small, big]
        else:
            document: dict[str, Any] = {"file_id": file_id, "file_unique_id": file_id, "file_size": stated}
            if name is not None:
                document["file_name"] = name
            if mime_type is not None:
                document["mime_type"] = mime_type
            extra["document"] = document
        if caption is not None:
            extra["caption"] = caption
        message_id = self.send(chat, "", sender=sender, extra=extra)
        # A photo or document has no text: only the caption.
        message = self._updates[-1]["message"] if self._updates else {}
        if message.get("message_id") == message_id:
            message.pop("text", None)
        return message_id

    def press(self, message: ApiCall, label: str, *, sender: dict[str, Any]) -> int:
        """``sender`` presses the button ``label`` under a message the bot sent; returns the update id."""
        buttons = [b for row in message.params["reply_markup"]["inline_keyboard"] for b in row]
        button = next(b for b in buttons if b["text"] == label)
        chat_id = int(message.params["chat_id"])
        chat = self._chats.get(chat_id, private_chat(chat_id))
        return self.push(
            {
                "callback_query": {
                    "id": f"q{next(self._update_ids)}",
                    "from": sender,
                    "chat_instance": "1",
                    "data": button["callback_data"],
                    "message": {
                        "message_id": message.result_id,
                        "date": 0,
                        "chat": chat,
                        "text": message.text,
                    },
                }
            }
        )

    # Waiting

    def mark(self) -> int:
        """An index into ``calls``: pass it as ``after`` to look only at later calls."""
        return len(self.calls)

    def find(self, method: str, *, after: int = 0, **match: Any) -> list[ApiCall]:
        return [
            call
            for call in self.calls[after:]
            if call.method == method and all(call.params.get(k) == v for k, v in match.items())
        ]

    async def wait_call(
        self,
        method: str,
        *,
        after: int = 0,
        where: Callable[[ApiCall], bool] = lambda _: True,
        timeout: float = _WAIT_TIMEOUT,
        ok: bool = True,
        **match: Any,
    ) -> ApiCall:
        """The first call of ``method`` (after index ``after``) that matches; waits for it, bounded."""
        try:
            with anyio.fail_after(timeout):
                while True:
                    recorded = self._recorded
                    for call in self.find(method, after=after, **match):
                        if where(call) and (not ok or call.status == 200):
                            return call
                    await recorded.wait()
        except TimeoutError:
            raise AssertionError(
                f"no {method} call matching {match} came; the calls were:\n{self._seen(after)}"
            ) from None

    async def wait_until(self, done: Callable[[], bool], *, timeout: float = _WAIT_TIMEOUT) -> None:
        """Until ``done()`` holds, looked at again after each call the bot makes; bounded."""
        with anyio.fail_after(timeout):
            while True:
                recorded = self._recorded
                if done():
                    return
                await recorded.wait()

    def _seen(self, after: int) -> str:
        """The last calls since ``after`` but the polls, for a failure's message."""
        calls = [c for c in self.calls[after:] if c.method != "getUpdates"][-20:]
        return "\n".join(f"  {c.method} {c.status} chat={c.chat_id} {c.text[:80]!r}" for c in calls)

    async def wait_reply(
        self, chat_id: int, contains: str, *, after: int = 0, timeout: float = _WAIT_TIMEOUT
    ) -> ApiCall:
        """The first message the bot showed in ``chat_id`` whose text contains ``contains``: sent,
        or a live message edited into it (a streamed reply ends as an edit of its message)."""
        try:
            with anyio.fail_after(timeout):
                while True:
                    recorded = self._recorded
                    for call in self.calls[after:]:
                        if (
                            call.method in ("sendMessage", "editMessageText")
                            and call.params.get("chat_id") == chat_id
                            and call.status == 200
                            and contains in call.text
                        ):
                            return call
                    await recorded.wait()
        except TimeoutError:
            raise AssertionError(
                f"no message holding {contains!r} came to chat {chat_id}; the calls were:\n{self._seen(after)}"
            ) from None

    def texts(self, chat_id: int, *, after: int = 0) -> list[str]:
        """The texts the bot sent to ``chat_id``, successful sends only."""
        return [c.text for c in self.find("sendMessage", after=after, chat_id=chat_id) if c.status == 200]

    async def post_to_webhook(self, *, retry: float = 0.05) -> None:
        """Deliver queued updates to the webhook as Telegram does, until cancelled.

        One at a time, in order, with the secret token; an update is dropped from the queue only
        once the bot answered 200, and tried again (after ``retry`` seconds, as Telegram waits
        too) while the bot is down or answers anything else.
        """
        async with httpx.AsyncClient(trust_env=False, timeout=30.0) as client:
            while True:
                queued, webhook = self._queued, self.webhook
                if webhook is None or not self._updates:
                    with anyio.move_on_after(self.max_hold):
                        await queued.wait()  # an update, or the webhook set
                    continue
                update = self._updates[0]
                try:
                    response = await client.post(
                        self.proxy or str(webhook["url"]),
                        json=update,
                        headers={"X-Telegram-Bot-Api-Secret-Token": str(webhook.get("secret_token", ""))},
                    )
                    delivered = response.status_code == 200
                except httpx.TransportError:
                    delivered = False
                if delivered:
                    if self._updates and self._updates[0] is update:
                        self._updates.pop(0)
                else:
                    await anyio.sleep(retry)

    # Serving

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/bot{token}/{method}", self._endpoint, methods=["GET", "POST"]),
                Route("/file/bot{token}/{path:path}", self._download, methods=["GET"]),
            ]
        )

    async def _download(self, request: Request) -> Response:
        """A file's bytes, as Telegram serves them at ``/file/bot<token>/<file_path>``."""
        path = request.path_params["path"]
        self._record("download", {"path": path}, 200)
        data = self.files.get(path.rpartition("/")[2])
        if request.path_params["token"] != self.token or data is None:
            return Response(status_code=404)
        return Response(data, media_type="application/octet-stream")

    def _get_file(self, params: dict[str, Any]) -> dict[str, Any]:
        file_id = str(params["file_id"])
        return {
            "file_id": file_id,
            "file_unique_id": file_id,
            "file_size": len(self.files.get(file_id, b"")),
            "file_path": f"documents/{file_id}",
        }

    def _record(self, method: str, params: dict[str, Any], status: int, result_id: int | None = None) -> None:
        self.calls.append(ApiCall(method, params, status, time.monotonic(), result_id))
        self._recorded.set()
        self._recorded = anyio.Event()

    def _too_soon(self, method: str, params: dict[str, Any]) -> tuple[int, str, dict[str, Any]] | None:
        """429 for an edit or draft sooner than ``edit_every`` after the last one in its chat."""
        if not self.edit_every or method not in ("editMessageText", "sendMessageDraft"):
            return None
        chat_id = params.get("chat_id")
        last = next(
            (
                c.at
                for c in reversed(self.calls)
                if c.method == method and c.status == 200 and c.chat_id == chat_id
            ),
            None,
        )
        if last is None or (wait := last + self.edit_every - time.monotonic()) <= 0:
            return None
        seconds = max(1, math.ceil(wait))
        return 429, f"Too Many Requests: retry after {seconds}", {"retry_after": seconds}

    def _failure(self, method: str, params: dict[str, Any]) -> tuple[int, str, dict[str, Any] | None] | None:
        """The error this call is to fail with, as the test set it up: status, description, parameters."""
        if method in self.retry_after:
            seconds = self.retry_after.pop(method)
            return 429, f"Too Many Requests: retry after {seconds}", {"retry_after": seconds}
        if (limited := self._too_soon(method, params)) is not None:
            return limited
        if self.server_errors.get(method):
            self.server_errors[method] -= 1
            return 502, "Bad Gateway", None
        if method == "sendMessage":
            chat_id = int(params.get("chat_id", 0))
            if chat_id in self.flood:
                seconds = self.flood[chat_id]
                return 429, f"Too Many Requests: retry after {seconds}", {"retry_after": seconds}
            if chat_id in self.no_private_chat:
                return 403, "Forbidden: bot can't initiate conversation with a user", None
            if self.reject_entities and params.get("entities"):
                return 400, "Bad Request: can't parse entities", None
            if self.reject_button_urls and _url_buttons(params):
                return 400, "Bad Request: BUTTON_URL_INVALID", None
        if method == "deleteMessage" and self.fail_delete:
            return 400, "Bad Request: message can't be deleted", None
        return None

    async def _endpoint(self, request: Request) -> JSONResponse:
        if request.path_params["token"] != self.token:
            self._record(request.path_params["method"], {}, 401)
            return JSONResponse(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, status_code=401
            )
        method = request.path_params["method"]
        params = await _params(request)
        if (failure := self._failure(method, params)) is not None:
            status, description, parameters = failure
            self._record(method, params, status)
            body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
            if parameters is not None:
                body["parameters"] = parameters
            return JSONResponse(body, status_code=status)
        if method == "getUpdates":
            # Recorded on arrival, so that a test can tell the bot is polling while the poll is held.
            self._record(method, params, 200)
            return JSONResponse({"ok": True, "result": await self._get_updates(params)})
        if method == "setWebhook":
            self.webhook = params
        elif method == "deleteWebhook":
            self.webhook = None
        if method in ("setWebhook", "deleteWebhook"):
            self._queued.set()
            self._queued = anyio.Event()
        handler = _RESULTS.get(method)
        if handler is None:
            self._record(method, params, 404)
            return JSONResponse({"ok": False, "error_code": 404, "description": "Not Found"}, status_code=404)
        result = handler(self, params)
        result_id = result.get("message_id") if isinstance(result, dict) else None
        self._record(method, params, 200, result_id)
        return JSONResponse({"ok": True, "result": result})

    async def _get_updates(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        self._updates = [u for u in self._updates if u["update_id"] >= offset]
        if not self._updates and not self._closing and float(params.get("timeout") or 0) > 0:
            queued = self._queued
            with anyio.move_on_after(min(float(params["timeout"]), self.max_hold)):
                await queued.wait()
        limit = int(params.get("limit") or 100)
        return [u for u in self._updates if u["update_id"] >= offset][:limit]

    def _sent_message(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = int(params["chat_id"])
        chat = self._chats.get(chat_id, {"id": chat_id, "type": "private", "first_name": "someone"})
        sent: dict[str, Any] = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": chat,
            "from": BOT_USER,
            "text": params.get("text", ""),
        }
        if params.get("message_thread_id") is not None:
            sent["message_thread_id"] = params["message_thread_id"]
            sent["is_topic_message"] = True
        return sent

    def _edited(self, params: dict[str, Any]) -> dict[str, Any]:
        chat_id = int(params["chat_id"])
        return {
            "message_id": int(params["message_id"]),
            "date": int(time.time()),
            "edit_date": int(time.time()),
            "chat": self._chats.get(chat_id, {"id": chat_id, "type": "private", "first_name": "someone"}),
            "from": BOT_USER,
            "text": params.get("text", ""),
        }

    def _administrators(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        return self.administrators.get(int(params["chat_id"]), [])


def _url_buttons(params: dict[str, Any]) -> list[str]:
    markup = params.get("reply_markup")
    rows = markup.get("inline_keyboard", []) if isinstance(markup, dict) else []
    return [button["url"] for row in rows for button in row if "url" in button]


def creator(member: dict[str, Any]) -> dict[str, Any]:
    """A ``ChatMemberOwner`` entry for ``getChatAdministrators``."""
    return {"status": "creator", "user": member, "is_anonymous": False}


def owned_group(fake: FakeBotApi, chat_id: int, owner: int, *, forum: bool = False) -> dict[str, Any]:
    """The group chat ``chat_id``, whose creator ``fake`` says is the user ``owner``."""
    fake.administrators[chat_id] = [creator(user(owner))]
    return group_chat(chat_id, forum=forum)


def _done(fake: FakeBotApi, params: dict[str, Any]) -> bool:
    """Telegram's result for an action it did."""
    return True


_RESULTS: dict[str, Callable[[FakeBotApi, dict[str, Any]], Any]] = {
    "getMe": lambda fake, _: BOT_USER,
    "sendMessage": FakeBotApi._sent_message,
    "getChatAdministrators": FakeBotApi._administrators,
    "editMessageText": FakeBotApi._edited,
    "getFile": FakeBotApi._get_file,
    **dict.fromkeys(
        [
            "deleteMessage",
            "sendChatAction",
            "setMyCommands",
            "deleteWebhook",
            "setWebhook",
            "setMyDescription",
            "setMyShortDescription",
            "answerCallbackQuery",
            "editMessageReplyMarkup",
            "sendMessageDraft",
        ],
        _done,
    ),
}


async def _params(request: Request) -> dict[str, Any]:
    body = (await request.body()).decode()
    if request.headers.get("content-type", "").startswith("application/json"):
        loaded = json.loads(body or "{}")
        return dict(loaded) if isinstance(loaded, dict) else {}
    params: dict[str, Any] = {}
    for name, value in parse_qsl(body, keep_blank_values=True):
        if name in _RAW:
            params[name] = value
            continue
        try:
            params[name] = json.loads(value)
        except ValueError:
            params[name] = value
    return params


def migration(fake: FakeBotApi, chat: dict[str, Any], sender: dict[str, Any], **ids: int) -> None:
    """The service message Telegram sends when a group becomes a supergroup (``migrate_to/from_chat_id``)."""
    fake.push(
        {
            "message": {
                "message_id": next(fake._message_ids),
                "date": 0,
                "chat": chat,
                "from": sender,
                **{f"migrate_{way}_chat_id": chat_id for way, chat_id in ids.items()},
            }
        }
    )


def upgraded(fake: FakeBotApi, old: dict[str, Any], new: dict[str, Any], sender: dict[str, Any]) -> None:
    """Both service messages of the group ``old`` become the supergroup ``new``: in each chat, the other's id."""
    migration(fake, old, sender, to=new["id"])
    migration(fake, new, sender, **{"from": old["id"]})
