"""The ``playa`` command: ``chat`` (the console), ``telegram``, ``audit``, ``db``, ``demo-server``
and ``oauth-client-metadata``."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

import anyio
import anyio.abc

from . import __version__
from ._environ import default_data_dir, env_seconds, host_config_from_env, oauth_client_metadata, remote_mcp
from ._runtime import tune_runtime
from .agent import Host, HostConfig
from .core import (
    EnvPolicy,
    Extension,
    install_outbound_gate,
    outbound_secrets,
    session_state_dir,
)
from .exceptions import ConfigError, DatabaseError
from .mcp_remote import (
    CALLBACK_PATH,
    KEY_FILE_NAME,
    AuditKey,
    HostSecret,
    RemoteMcpExtension,
    Verification,
    audit_folder,
    resolve_host_secret,
    verify_log,
    verify_rows,
)
from .mcp_remote.store import Sealer

__all__ = ["main"]

logger = logging.getLogger(__name__)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="playa",
        description="A chat-agent host whose chat owners connect their own remote MCP servers.",
    )
    parser.add_argument("--version", action="version", version=f"playa {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    chat = commands.add_parser(
        "chat", help="chat in the console (the default)", description="Chat in the console."
    )
    _common_options(chat)
    chat.add_argument("--scope", default="default", help="the console chat's name (default: default)")
    chat.add_argument(
        "--demo",
        action="store_true",
        help="also run the demo MCP server on loopback and print the /mcp_add line to paste",
    )
    commands.add_parser("demo-server", help="run a small MCP server behind a bearer token (see its --help)")
    commands.add_parser(
        "oauth-client-metadata",
        help="print Playa's OAuth client metadata document, to serve at $PLAYA_OAUTH_CLIENT_METADATA_URL",
        description="Print Playa's OAuth client metadata document (JSON). Serve it at the https URL "
        "set in $PLAYA_OAUTH_CLIENT_METADATA_URL: authorization servers that take such documents "
        "then know Playa by that URL, without a registration.",
    )

    _telegram_parser(commands)
    _audit_parser(commands)
    _db_parser(commands)
    return parser


def _common_options(sub: argparse.ArgumentParser) -> None:
    """The options of every command that runs chats."""
    sub.add_argument(
        "--model", help="a pydantic-ai model string, or 'offline' (default: $PLAYA_MODEL or offline)"
    )
    sub.add_argument("--data-dir", type=Path, help="where chats are kept (default: $PLAYA_DATA_DIR)")
    sub.add_argument("--log-level", help="DEBUG, INFO, WARNING (default: $PLAYA_LOG_LEVEL or WARNING)")


def _telegram_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tg = commands.add_parser(
        "telegram",
        help="run the chats as a Telegram bot ($TELEGRAM_BOT_TOKEN)",
        description="Run Playa as a Telegram bot. The token comes from $TELEGRAM_BOT_TOKEN.",
    )
    _common_options(tg)
    tg.add_argument(
        "--base-url",
        help="Bot API server root, e.g. a local server http://127.0.0.1:8081 "
        "(default: $PLAYA_TELEGRAM_BASE_URL or https://api.telegram.org)",
    )
    tg.add_argument(
        "--webhook-url",
        help="receive updates by webhook at this public https URL instead of long polling "
        "(default: $PLAYA_TELEGRAM_WEBHOOK_URL)",
    )
    tg.add_argument(
        "--webhook-listen", default="127.0.0.1", help="address the webhook listens on (default: %(default)s)"
    )
    tg.add_argument(
        "--webhook-port", type=int, default=8443, help="port the webhook listens on (default: %(default)s)"
    )
    tg.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="with long polling: where the bot's listener takes requests: /healthz, /metrics, and "
        "the login redirect forwarded from $PLAYA_PUBLIC_URL (default: $PLAYA_LISTEN; "
        "127.0.0.1:8443 with $PLAYA_PUBLIC_URL, else none)",
    )


def _audit_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = commands.add_parser(
        "audit",
        help="check or export a chat's audit log",
        description="Check or export a chat's audit log: what was done with its remote MCP servers and "
        "tools. The host secret comes from the environment as for the chat itself; with "
        "$PLAYA_DATABASE_URL the log is the database's.",
    )
    actions = audit.add_subparsers(dest="action", metavar="ACTION", required=True)
    verify = actions.add_parser(
        "verify",
        help="check the chain of records; exits 1 and says where it breaks",
        description=(
            "Check a chat's audit log: every record sealed for this chat, in order, none missing "
            "after the last its head record names. Exits 1 and says where the chain breaks."
        ),
    )
    export = actions.add_parser(
        "export",
        help="write the records that verify as JSON lines",
        description=(
            "Write the records of a chat's audit log that verify, one JSON object a line; "
            "exits 1 (after writing them) when the chain breaks."
        ),
    )
    export.add_argument("-o", "--output", type=Path, metavar="FILE", help="write to FILE (default: stdout)")
    for sub in (verify, export):
        sub.add_argument(
            "--chat",
            default="console:default",
            metavar="SCOPE",
            help="the chat's scope: console:<name> or telegram:<chat id> (default: %(default)s)",
        )
        sub.add_argument("--data-dir", type=Path, help="where chats are kept (default: $PLAYA_DATA_DIR)")


def _db_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    db = commands.add_parser(
        "db",
        help="the PostgreSQL database ($PLAYA_DATABASE_URL)",
        description="Manage the PostgreSQL database that $PLAYA_DATABASE_URL names.",
    )
    actions = db.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser(
        "upgrade",
        help="apply the schema versions the database lacks",
        description="Bring the database's schema to this Playa's version, in one transaction. Safe to "
        "run again (nothing to do) and from several processes at once (one waits for the other).",
    )
    for action, help_text, description in (
        (
            "import",
            "move a data dir's chats (servers, history, files, audit logs) into the database",
            "Copy every chat's servers, history, workspace files and audit log from the data dir into "
            "the database, replacing what the database held for that chat. Safe to run again. A server, "
            "file or audit log that does not verify is reported and the rest goes on (exit status 1).",
        ),
        (
            "export",
            "write the database's chats (servers, history, files, audit logs) into a data dir",
            "Copy every chat's servers, history, workspace files and audit log from the database into "
            "the data dir, replacing what the data dir held for that chat. Safe to run again. A server "
            "or audit log that does not verify is reported and the rest goes on (exit status 1).",
        ),
    ):
        sub = actions.add_parser(action, help=help_text, description=description)
        sub.add_argument("--data-dir", type=Path, help="the data dir (default: $PLAYA_DATA_DIR)")


def _db(args: argparse.Namespace) -> int:
    try:
        from .db import upgrade_database  # imported here: asyncpg is in the postgres extra
    except ModuleNotFoundError as exc:
        if exc.name != "asyncpg":
            raise
        raise ConfigError("the database needs asyncpg: pip install 'playa[postgres]'") from None
    try:
        if args.action != "upgrade":
            return anyio.run(_db_transfer, args)
        done = anyio.run(upgrade_database, os.environ)
    except DatabaseError as exc:
        print(f"playa: {exc}", file=sys.stderr)
        return 1
    if done.applied:
        names = ", ".join(f"{m.version} {m.name}" for m in done.applied)
        print(f"upgraded the database's schema from version {done.before} to {done.after} ({names})")
    else:
        print(f"the database's schema is at version {done.after}: nothing to do")
    return 0


async def _db_transfer(args: argparse.Namespace) -> int:
    """``playa db import`` and ``playa db export``: 0 when everything moved, else 1."""
    from ._db_transfer import export_data_dir, import_data_dir
    from .db import open_storage

    data_dir: Path = args.data_dir or default_data_dir(os.environ)
    # The console's key file is read when it exists, never created: a new key opens nothing.
    secret = resolve_host_secret(
        os.environ, data_dir=data_dir, allow_generate=(data_dir / KEY_FILE_NAME).is_file()
    )
    if not isinstance(secret, HostSecret):
        raise ConfigError(secret.reason)
    sealer = Sealer(secret.value)
    async with open_storage(os.environ) as storage:
        if storage is None:
            raise ConfigError(
                "PLAYA_DATABASE_URL is not set: set it to postgresql://user:password@host:5432/database"
            )
        await storage.claim_key("servers", sealer.key_id)
        move = import_data_dir if args.action == "import" else export_data_dir
        done = await move(data_dir, storage, sealer, AuditKey(secret.value))
    verb = "imported into the database" if args.action == "import" else f"exported into {data_dir}"
    print(f"{verb}: {done.summary}")
    for problem in done.problems:
        print(f"not moved: {problem}", file=sys.stderr)
    return 1 if done.problems else 0


def _audit(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """``playa audit verify`` and ``playa audit export``: 0 when the chain is whole, else 1."""
    data_dir: Path = args.data_dir or default_data_dir(environ)
    # The console's key file is read when it exists, never created: a new key verifies nothing.
    secret = resolve_host_secret(
        environ, data_dir=data_dir, allow_generate=(data_dir / KEY_FILE_NAME).is_file()
    )
    if not isinstance(secret, HostSecret):
        raise ConfigError(secret.reason)
    key = AuditKey(secret.value)
    if environ.get("PLAYA_DATABASE_URL", "").strip():
        found, where = anyio.run(_verify_rows, args.chat, key, environ)
    else:
        found = verify_log(audit_folder(session_state_dir(data_dir, args.chat)), args.chat, key)
        where = str(data_dir)
    if not found.records and not found.breaks:
        print(f"playa: chat {args.chat} has no audit log in {where}", file=sys.stderr)
        return 1
    if args.action == "export":
        lines = "".join(json.dumps(record.as_json(), ensure_ascii=False) + "\n" for record in found.records)
        if args.output is None:
            sys.stdout.write(lines)
        else:
            args.output.write_text(lines, encoding="utf-8")
    for broken in found.breaks:
        print(f"playa: the audit log of {args.chat} breaks at {broken}", file=sys.stderr)
    if found.breaks:
        return 1
    if args.action == "verify":
        last = found.records[-1]
        print(
            f"The audit log of {args.chat} is whole: {len(found.records)} records, the last #{last.seq} at {last.time}."
        )
    return 0


async def _verify_rows(scope: str, key: AuditKey, environ: Mapping[str, str]) -> tuple[Verification, str]:
    """The chat's audit log in the database ``PLAYA_DATABASE_URL`` names, verified; and where it is."""
    try:
        from .db import open_storage  # imported here: asyncpg is in the postgres extra
    except ImportError:
        raise ConfigError("PLAYA_DATABASE_URL needs asyncpg: pip install 'playa[postgres]'") from None
    async with open_storage(environ) as storage:
        assert storage is not None  # the URL is set
        return await verify_rows(storage.audit, scope, key), storage.where


def _configure_logging(level: str | None) -> None:
    logging.basicConfig(
        level=(level or os.environ.get("PLAYA_LOG_LEVEL") or "WARNING").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


async def _chat(args: argparse.Namespace) -> None:
    from .console import run_console

    config = host_config_from_env(args, os.environ)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    remote = remote_mcp(config, os.environ, console=True)
    extensions: list[Extension] = [remote]
    banner = f"Playa {__version__} — console chat '{args.scope}'. /help lists commands; Ctrl-D quits."
    async with (
        _state(config, remote) as config,
        Host(config, extensions) as host,
        anyio.create_task_group() as tg,
    ):
        if args.demo:
            banner = await _start_demo(tg) + "\n\n" + banner
            print(banner, flush=True)
        await run_console(host, scope_name=args.scope, banner=None if args.demo else banner)
        tg.cancel_scope.cancel()


async def _telegram(args: argparse.Namespace) -> None:
    try:
        # Imported here: python-telegram-bot is an optional dependency.
        from .telegram import (
            LEASE_SECONDS,
            RedirectRoute,
            Serving,
            TelegramSettings,
            run_telegram,
            telegram_options,
        )
    except ImportError:
        raise ConfigError(
            "the Telegram front end needs python-telegram-bot: pip install 'playa[telegram]'"
        ) from None
    options = telegram_options(args, os.environ)
    config = host_config_from_env(args, os.environ)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    remote = remote_mcp(config, os.environ, console=False, public_url=options.public_url)
    extensions: list[Extension] = [remote]
    redirect = None
    if options.public_url is not None:
        path = urlsplit(options.public_url).path.rstrip("/") + CALLBACK_PATH
        # With long polling, on a listener of its own (``options.listen``); else the webhook's.
        redirect = RedirectRoute(path=path, complete=remote.callbacks.receive)
    stop = anyio.Event()
    async with (
        _state(config, remote) as config,
        Host(config, extensions) as host,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(_stop_on_signals, stop, tg.cancel_scope)
        await run_telegram(
            host,
            token=options.token,
            base_url=options.base_url,
            settings=TelegramSettings(
                stop_grace=env_seconds(os.environ, "PLAYA_TELEGRAM_STOP_GRACE", 30.0),
                lease_seconds=env_seconds(os.environ, "PLAYA_LEASE_SECONDS", LEASE_SECONDS),
            ),
            serving=Serving(
                webhook=options.webhook,
                listen=options.listen,
                redirect=redirect,
                probe=_database_probe(config),
                stop=stop,
            ),
            storage=config.storage,
        )
        tg.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def _state(config: HostConfig, remote: RemoteMcpExtension) -> AsyncIterator[HostConfig]:
    """``config`` with where the chats' servers and history live: the database
    ``PLAYA_DATABASE_URL`` names, chosen once for the process, or the data dir."""
    if not os.environ.get("PLAYA_DATABASE_URL", "").strip():
        yield config
        return
    try:
        from .db import open_storage  # imported here: asyncpg is in the postgres extra
    except ImportError:
        raise ConfigError("PLAYA_DATABASE_URL needs asyncpg: pip install 'playa[postgres]'") from None
    async with open_storage(os.environ) as storage:
        if storage is not None and remote.seal_key_id is not None:
            # Another host secret would fail every row the others sealed: refused at start.
            await storage.claim_key("servers", remote.seal_key_id)
        if storage is not None:
            # A login's redirect may reach any process behind the public URL.
            remote.share_logins(storage.logins)
        yield replace(config, storage=storage)


def _database_probe(config: HostConfig) -> Callable[[], Awaitable[None]] | None:
    """The health check's ``SELECT 1`` when the state is in PostgreSQL."""
    if config.storage is None:
        return None
    from .db import DatabaseStorage  # the storage came from there: asyncpg is installed

    return config.storage.database.ping if isinstance(config.storage, DatabaseStorage) else None


async def _stop_on_signals(stop: anyio.Event, scope: anyio.CancelScope) -> None:
    """SIGINT or SIGTERM asks for a graceful stop; a second one stops at once."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            if stop.is_set():
                logger.warning("%s again: stopping now", signal.Signals(signum).name)
                scope.cancel()
                return
            logger.warning("%s: stopping once running turns finish", signal.Signals(signum).name)
            stop.set()


async def _start_demo(tg: anyio.abc.TaskGroup) -> str:
    """Serve the demo MCP server on a free loopback port; the text tells the user what to paste."""
    from . import demo_server

    ready = anyio.Event()
    found: list[str] = []

    def on_ready(url: str, token: str) -> None:
        found.extend([url, token])
        ready.set()

    tg.start_soon(lambda: demo_server.serve(port=0, ready=on_ready))
    with anyio.fail_after(10):
        await ready.wait()
    url, token = found
    return (
        f"Demo MCP server running at {url} (bearer token: {token}).\n"
        f"Connect it to this chat: /mcp_add demo {url} --bearer   (paste the token when asked),\n"
        "then try: demo__whoami"
    )


def _run(command: Callable[[argparse.Namespace], Awaitable[None]], args: argparse.Namespace) -> None:
    """Run ``command``; a setting or database error from within its task groups is raised alone,
    so that it is told as one line, not as a group's traceback."""
    try:
        anyio.run(command, args)
    except BaseExceptionGroup as group:
        told, rest = group.split((ConfigError, DatabaseError))
        if told is None or rest is not None:
            raise
        first: BaseException = told
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        raise first from None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo-server"]:
        from . import demo_server

        _configure_logging(None)
        return demo_server.main(argv[1:])
    # Before anything can log: every record passes the outbound gate, which knows the
    # environment's secrets (the bot token, the encryption secret, the providers' keys) at once.
    install_outbound_gate()
    deny = [name for name in os.environ.get("PLAYA_ENV_DENY", "").split(",") if name.strip()]
    outbound_secrets().add(EnvPolicy(deny, environ=os.environ).denied_values())
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["chat", *argv])
    _configure_logging(getattr(args, "log_level", None))
    tune_runtime()
    try:
        if args.command == "oauth-client-metadata":
            print(oauth_client_metadata(os.environ))
        elif args.command == "audit":
            return _audit(args, os.environ)
        elif args.command == "db":
            return _db(args)
        elif args.command == "chat":
            _run(_chat, args)
        elif args.command == "telegram":
            _run(_telegram, args)
    except ConfigError as exc:
        print(f"playa: {exc}", file=sys.stderr)
        return 2
    except DatabaseError as exc:
        print(f"playa: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    return 0
