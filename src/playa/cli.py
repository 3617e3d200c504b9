"""The ``playa`` command: ``chat`` (the console), ``telegram`` and ``demo-server``."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import anyio

from . import __version__
from .exceptions import ConfigError
from .host import EnvPolicy, Extension, Host, HostConfig

__all__ = ["main"]

logger = logging.getLogger(__name__)


def default_data_dir(environ: Mapping[str, str]) -> Path:
    """``$PLAYA_DATA_DIR``, else ``$XDG_DATA_HOME/playa``, else ``~/.local/share/playa``."""
    if environ.get("PLAYA_DATA_DIR"):
        return Path(environ["PLAYA_DATA_DIR"]).expanduser()
    base = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "playa"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="playa",
        description="A chat-agent host whose chat owners connect their own remote MCP servers.",
    )
    parser.add_argument("--version", action="version", version=f"playa {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def common(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "--model", help="a pydantic-ai model string, or 'offline' (default: $PLAYA_MODEL or offline)"
        )
        sub.add_argument("--data-dir", type=Path, help="where chats are kept (default: $PLAYA_DATA_DIR)")
        sub.add_argument("--log-level", help="DEBUG, INFO, WARNING (default: $PLAYA_LOG_LEVEL or WARNING)")

    chat = commands.add_parser(
        "chat", help="chat in the console (the default)", description="Chat in the console."
    )
    common(chat)
    chat.add_argument("--scope", default="default", help="the console chat's name (default: default)")
    return parser


def _configure_logging(level: str | None) -> None:
    logging.basicConfig(
        level=(level or os.environ.get("PLAYA_LOG_LEVEL") or "WARNING").upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _host_config(args: argparse.Namespace, environ: Mapping[str, str]) -> HostConfig:
    extra = [n for n in environ.get("PLAYA_ENV_DENY", "").split(",") if n.strip()]
    return HostConfig(
        data_dir=args.data_dir or default_data_dir(environ),
        model=args.model or environ.get("PLAYA_MODEL") or "offline",
        env=EnvPolicy(extra, environ=environ),
    )


async def _chat(args: argparse.Namespace) -> None:
    from .console import run_console

    config = _host_config(args, os.environ)
    extensions: list[Extension] = []
    async with Host(config, extensions) as host:
        banner = f"Playa {__version__} — console chat '{args.scope}'. /help lists commands; Ctrl-D quits."
        await run_console(host, scope_name=args.scope, banner=banner)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["chat", *(argv or sys.argv[1:])])
    _configure_logging(args.log_level)
    try:
        if args.command == "chat":
            anyio.run(_chat, args)
    except ConfigError as exc:
        print(f"playa: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(file=sys.stderr)
        return 130
    return 0
