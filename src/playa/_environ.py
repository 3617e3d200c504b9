"""The host's and the remote-MCP extension's settings as the environment gives them.

Each reader names the variable to fix when its value is wrong.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping
from pathlib import Path

from .agent import HostConfig, ModelLimits
from .core import QUESTION_TIMEOUT, EnvPolicy
from .exceptions import ConfigError
from .mcp_remote import (
    FLOW_GUARD_MODES,
    Callbacks,
    ConnectionSettings,
    Decision,
    EgressPolicy,
    FlowGuardMode,
    RemoteMcpExtension,
    RemoteMcpSettings,
    client_metadata_document,
    decision_of,
    resolve_host_secret,
)

__all__ = [
    "default_data_dir",
    "env_seconds",
    "env_tokens",
    "host_config_from_env",
    "oauth_client_metadata",
    "remote_mcp",
]


def default_data_dir(environ: Mapping[str, str]) -> Path:
    """``$PLAYA_DATA_DIR``, else ``$XDG_DATA_HOME/playa``, else ``~/.local/share/playa``."""
    if environ.get("PLAYA_DATA_DIR"):
        return Path(environ["PLAYA_DATA_DIR"]).expanduser()
    base = environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base).expanduser() / "playa"


def host_config_from_env(args: argparse.Namespace, environ: Mapping[str, str]) -> HostConfig:
    extra = [n for n in environ.get("PLAYA_ENV_DENY", "").split(",") if n.strip()]
    return HostConfig(
        data_dir=args.data_dir or default_data_dir(environ),
        model=args.model or environ.get("PLAYA_MODEL") or "offline",
        env=EnvPolicy(extra, environ=environ),
        session_idle=env_seconds(environ, "PLAYA_SESSION_IDLE", 1800.0, never="never"),
        model_limits=ModelLimits(timeout=env_seconds(environ, "PLAYA_MODEL_TIMEOUT", 120.0)),
        context_tokens=env_tokens(environ, "PLAYA_CONTEXT_TOKENS"),
        workspace_quota=env_bytes(environ, "PLAYA_WORKSPACE_QUOTA"),
    )


_BYTE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def env_bytes(environ: Mapping[str, str], name: str) -> int | None:
    """A number of bytes from the environment (``500000``, ``64M``: K, M and G are 1024-based);
    None when unset."""
    text = environ.get(name, "").strip()
    if not text:
        return None
    unit = text[-1].upper() if text[-1].upper() in _BYTE_UNITS else ""
    digits = (text[:-1] if unit else text).replace("_", "")
    if not digits.isascii() or not digits.isdigit() or int(digits) < 1:
        raise ConfigError(
            f"{name} must be a whole number of bytes, optionally with K, M or G (64M), got {text!r}: "
            "fix or unset it"
        )
    return int(digits) * _BYTE_UNITS[unit]


def env_tokens(environ: Mapping[str, str], name: str) -> int | None:
    """A number of tokens from the environment, at least 1,000; None when unset."""
    text = environ.get(name, "").strip()
    if not text:
        return None
    digits = text.replace("_", "").replace(",", "")
    if not digits.isascii() or not digits.isdigit() or int(digits) < 1000:
        raise ConfigError(
            f"{name} must be a whole number of tokens, at least 1000, got {text!r}: fix or unset it"
        )
    return int(digits)


def env_seconds(environ: Mapping[str, str], name: str, default: float, *, never: str | None = None) -> float:
    """A number of seconds from the environment; ``never`` (if allowed) is infinity."""
    text = environ.get(name, "").strip()
    if not text:
        return default
    if never is not None and text.lower() == never:
        return math.inf
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        hint = f" (or {never})" if never else ""
        raise ConfigError(
            f"{name} must be a positive number of seconds{hint}, got {text!r}: fix or unset it"
        ) from None
    return value


def remote_mcp(
    config: HostConfig, environ: Mapping[str, str], *, console: bool, public_url: str | None = None
) -> RemoteMcpExtension:
    """The mcp-remote extension as the environment configures it.

    The console's owner is the operator, so it may reach any address and generate its own
    key; a Telegram bot serves strangers, so by default it only connects to public addresses.
    With ``public_url``, logins redirect to ``<public_url>/oauth/callback`` (the front end serves
    it), else to a loopback listener of the extension's own.
    """
    secret = resolve_host_secret(environ, data_dir=config.data_dir, allow_generate=console)
    try:
        egress = EgressPolicy.parse(
            environ.get("PLAYA_EGRESS"),
            environ.get("PLAYA_EGRESS_ALLOW"),
            default="any" if console else "public",
        )
    except ConfigError as exc:
        raise ConfigError(f"PLAYA_EGRESS / PLAYA_EGRESS_ALLOW: {exc}") from None
    call_timeout = env_seconds(environ, "PLAYA_CALL_TIMEOUT", 60.0)
    call_max = env_seconds(environ, "PLAYA_CALL_MAX", max(900.0, call_timeout))
    if call_max < call_timeout:
        raise ConfigError(
            f"PLAYA_CALL_MAX ({call_max:g} s) is below PLAYA_CALL_TIMEOUT ({call_timeout:g} s): "
            "raise it, or unset it"
        )
    connection = ConnectionSettings(
        connect_timeout=env_seconds(environ, "PLAYA_CONNECT_TIMEOUT", 15.0),
        call_timeout=call_timeout,
        call_max=call_max,
        egress=egress,
        trust_env=environ.get("PLAYA_HTTP_TRUST_ENV", "").strip().lower() in ("1", "true", "yes"),
    )
    return RemoteMcpExtension(
        secret,
        settings=_remote_settings(environ, connection),
        callbacks=Callbacks(public_url=public_url) if public_url is not None else None,
    )


_OAUTH_VARIABLES = {
    "oauth_client_metadata_url": "PLAYA_OAUTH_CLIENT_METADATA_URL",
    "oauth_callback_port": "PLAYA_OAUTH_CALLBACK_PORT",
    "login_timeout": "PLAYA_OAUTH_LOGIN_TIMEOUT",
}


def _remote_settings(environ: Mapping[str, str], connection: ConnectionSettings) -> RemoteMcpSettings:
    """The settings of remote servers from the environment; an error names the variable to fix."""
    port_text = environ.get("PLAYA_OAUTH_CALLBACK_PORT", "").strip()
    try:
        port = int(port_text) if port_text else 0
    except ValueError:
        raise ConfigError(
            f"PLAYA_OAUTH_CALLBACK_PORT must be a port number (1 to 65535), got {port_text!r}: fix or unset it"
        ) from None
    try:
        return RemoteMcpSettings(
            connection=connection,
            approval_interval=env_seconds(environ, "PLAYA_APPROVAL_INTERVAL", 600.0),
            oauth_client_metadata_url=environ.get("PLAYA_OAUTH_CLIENT_METADATA_URL", "").strip() or None,
            oauth_callback_port=port,
            login_timeout=env_seconds(environ, "PLAYA_OAUTH_LOGIN_TIMEOUT", 600.0),
            flow_guard=_flow_guard(environ),
            default_policy=_default_policy(environ),
            ask_timeout=env_seconds(environ, "PLAYA_ASK_TIMEOUT", QUESTION_TIMEOUT),
        )
    except ConfigError as exc:
        variable = next((v for field, v in _OAUTH_VARIABLES.items() if field in str(exc)), None)
        if variable is None:
            raise
        raise ConfigError(f"{variable}: {exc}: fix or unset it") from None


def _default_policy(environ: Mapping[str, str]) -> Decision:
    """``PLAYA_DEFAULT_POLICY``: what applies to a tool whose owner set no policy (``allow`` unset)."""
    text = environ.get("PLAYA_DEFAULT_POLICY", "").strip()
    decision = decision_of(text) if text else "allow"
    if decision is None:
        raise ConfigError(f"PLAYA_DEFAULT_POLICY must be allow, ask or deny, got {text!r}: fix or unset it")
    return decision


def _flow_guard(environ: Mapping[str, str]) -> FlowGuardMode | None:
    """``PLAYA_FLOW_GUARD``: ``ask``, ``log`` or ``off``; unset, ``ask`` in groups and ``log`` in private chats."""
    text = environ.get("PLAYA_FLOW_GUARD", "").strip().lower()
    if not text:
        return None
    for mode in FLOW_GUARD_MODES:
        if text == mode:
            return mode
    raise ConfigError(f"PLAYA_FLOW_GUARD must be ask, log or off, got {text!r}: fix or unset it")


def oauth_client_metadata(environ: Mapping[str, str]) -> str:
    """The client metadata document for the operator to serve, as JSON."""
    settings = _remote_settings(environ, ConnectionSettings())
    if settings.oauth_client_metadata_url is None:
        raise ConfigError(
            "set PLAYA_OAUTH_CLIENT_METADATA_URL to the https URL where you will serve the document: "
            "it is the document's client_id"
        )
    public_url = None
    if environ.get("PLAYA_PUBLIC_URL", "").strip():
        try:
            from .telegram import public_url_from
        except ImportError:
            raise ConfigError(
                "PLAYA_PUBLIC_URL is the Telegram front end's, which needs python-telegram-bot: "
                "pip install 'playa[telegram]', or unset it"
            ) from None
        public_url = public_url_from(environ)
    document = client_metadata_document(
        settings.oauth_client_metadata_url, port=settings.oauth_callback_port, public_url=public_url
    )
    return json.dumps(document, indent=2)
