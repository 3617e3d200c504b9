from __future__ import annotations

import argparse
import json
import math
import platform
import socket
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from playa._runtime import GC_THRESHOLDS
from playa.agent import Host
from playa.cli import default_data_dir, host_config_from_env, remote_mcp
from playa.core import session_state_dir
from playa.exceptions import ConfigError
from playa.mcp_remote import AuditKey, audit_folder
from playa.mcp_remote.store import AuditLog
from support.faults import FAULTS_OF_A_LARGE_STRING, PAGES
from support.host import host_config


def _args(data_dir: Path) -> argparse.Namespace:
    return argparse.Namespace(data_dir=data_dir, model=None)


def test_the_data_dir_comes_from_the_environment() -> None:
    assert default_data_dir({"PLAYA_DATA_DIR": "/srv/playa"}) == Path("/srv/playa")
    assert default_data_dir({"XDG_DATA_HOME": "/x"}) == Path("/x/playa")


def test_the_console_reaches_any_address_and_telegram_only_public_ones(tmp_path: Path) -> None:
    config = host_config(tmp_path)
    secret = {"MCP_ENCRYPTION_SECRET": "s" * 32}
    assert remote_mcp(config, secret, console=True).settings.connection.egress.mode == "any"
    telegram = remote_mcp(config, secret, console=False).settings.connection.egress
    assert telegram.mode == "public"
    assert telegram.url_refusal("http://127.0.0.1:8080/mcp") is not None
    allowed = remote_mcp(config, {**secret, "PLAYA_EGRESS_ALLOW": "127.0.0.1/32"}, console=False)
    assert allowed.settings.connection.egress.url_refusal("http://127.0.0.1:8080/mcp") is None


def test_only_the_console_generates_a_host_secret(tmp_path: Path) -> None:
    config = host_config(tmp_path)
    assert remote_mcp(config, {}, console=True).disabled_reason is None
    reason = remote_mcp(config, {}, console=False).disabled_reason
    assert reason is not None and "MCP_ENCRYPTION_SECRET" in reason


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PLAYA_CONNECT_TIMEOUT": "soon"}, "PLAYA_CONNECT_TIMEOUT must be a positive number of seconds"),
        ({"PLAYA_CALL_TIMEOUT": "-1"}, "PLAYA_CALL_TIMEOUT must be a positive number of seconds, got '-1'"),
        ({"PLAYA_CALL_TIMEOUT": "inf"}, "PLAYA_CALL_TIMEOUT must be a positive number of seconds"),
        ({"PLAYA_CALL_MAX": "forever"}, "PLAYA_CALL_MAX must be a positive number of seconds, got 'forever'"),
        (
            {"PLAYA_CALL_TIMEOUT": "120", "PLAYA_CALL_MAX": "60"},
            "PLAYA_CALL_MAX \\(60 s\\) is below PLAYA_CALL_TIMEOUT \\(120 s\\)",
        ),
        ({"PLAYA_APPROVAL_INTERVAL": "0"}, "PLAYA_APPROVAL_INTERVAL must be a positive number of seconds"),
        ({"PLAYA_APPROVAL_INTERVAL": "10m"}, "PLAYA_APPROVAL_INTERVAL must be a positive number of seconds"),
        ({"PLAYA_EGRESS": "sometimes"}, "PLAYA_EGRESS"),
        (
            {"PLAYA_OAUTH_LOGIN_TIMEOUT": "0"},
            "PLAYA_OAUTH_LOGIN_TIMEOUT must be a positive number of seconds",
        ),
        ({"PLAYA_OAUTH_CALLBACK_PORT": "eighty"}, "PLAYA_OAUTH_CALLBACK_PORT must be a port number"),
        ({"PLAYA_OAUTH_CALLBACK_PORT": "65536"}, "PLAYA_OAUTH_CALLBACK_PORT: .*must be a port"),
        (
            {"PLAYA_OAUTH_CLIENT_METADATA_URL": "http://example.com/playa.json"},
            "PLAYA_OAUTH_CLIENT_METADATA_URL: .*must be an https URL with a path",
        ),
        ({"PLAYA_OAUTH_CLIENT_METADATA_URL": "https://example.com/"}, "PLAYA_OAUTH_CLIENT_METADATA_URL: "),
    ],
)
def test_bad_settings_are_clear_errors(tmp_path: Path, env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        remote_mcp(host_config(tmp_path), env, console=True)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "0",
            "PLAYA_SESSION_IDLE must be a positive number of seconds \\(or never\\), got '0': fix or unset it",
        ),
        ("half an hour", "PLAYA_SESSION_IDLE must be a positive number of seconds"),
    ],
)
def test_a_bad_session_idle_time_is_a_clear_error_naming_the_variable(
    tmp_path: Path, text: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        host_config_from_env(_args(tmp_path), {"PLAYA_SESSION_IDLE": text})


def test_the_session_idle_time_comes_from_the_environment(tmp_path: Path) -> None:
    assert host_config_from_env(_args(tmp_path), {}).session_idle == 1800.0
    assert host_config_from_env(_args(tmp_path), {"PLAYA_SESSION_IDLE": "90"}).session_idle == 90.0
    assert host_config_from_env(_args(tmp_path), {"PLAYA_SESSION_IDLE": "never"}).session_idle == math.inf


def test_a_connect_timeout_above_the_hook_timeout_raises_the_hook_bound_to_fit(tmp_path: Path) -> None:
    # Every turn waits for connects in flight: a hook bound below the connect timeout would
    # cut every slow connect short and fail the hook instead.
    config = host_config(tmp_path, hook_timeout=60.0)
    extension = remote_mcp(config, {"PLAYA_CONNECT_TIMEOUT": "120"}, console=True)
    host = Host(config, [extension])
    assert host.hook_timeout(extension) > 120.0
    default = remote_mcp(config, {}, console=True)
    assert Host(config, [default]).hook_timeout(default) == 60.0


def test_environment_proxies_are_used_only_when_the_operator_says_so(tmp_path: Path) -> None:
    config = host_config(tmp_path)
    assert not remote_mcp(config, {}, console=True).settings.connection.trust_env
    assert remote_mcp(config, {"PLAYA_HTTP_TRUST_ENV": "1"}, console=True).settings.connection.trust_env


def test_the_playa_command_tunes_the_collector_and_the_allocator_for_its_host(tmp_path: Path) -> None:
    # In a child process: the settings are the process's, and this one's stay as they are.
    script = (
        "import gc, sys\n"
        "from playa.cli import main\n"
        "code = main(['chat', '--data-dir', sys.argv[1]])\n"
        + FAULTS_OF_A_LARGE_STRING
        + "print('faults', faults_of_a_large_string())\n"
        "print('thresholds', *gc.get_threshold())\n"
        "sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "thresholds " + " ".join(map(str, GC_THRESHOLDS))
    assert GC_THRESHOLDS != (700, 10, 10)
    if platform.libc_ver()[0] == "glibc":  # tests/test_runtime.py: a fault per page without the setting
        assert int(done.stdout.splitlines()[-2].removeprefix("faults ")) < PAGES // 20


def test_the_model_timeout_comes_from_the_environment_and_bad_values_are_clear_errors(tmp_path: Path) -> None:
    args = argparse.Namespace(data_dir=tmp_path, model=None)
    assert host_config_from_env(args, {}).model_limits.timeout == 120.0
    assert host_config_from_env(args, {"PLAYA_MODEL_TIMEOUT": "7.5"}).model_limits.timeout == 7.5
    with pytest.raises(ConfigError, match="PLAYA_MODEL_TIMEOUT must be a positive number of seconds"):
        host_config_from_env(args, {"PLAYA_MODEL_TIMEOUT": "0"})


def test_the_context_budget_comes_from_the_environment_and_bad_values_are_clear_errors(
    tmp_path: Path,
) -> None:
    args = argparse.Namespace(data_dir=tmp_path, model=None)
    assert host_config_from_env(args, {}).context_tokens is None
    assert host_config_from_env(args, {"PLAYA_CONTEXT_TOKENS": "8000"}).context_tokens == 8000
    assert host_config_from_env(args, {"PLAYA_CONTEXT_TOKENS": "128_000"}).context_tokens == 128_000
    for bad in ("999", "lots", "-5000", "1e6", "８０００"):
        with pytest.raises(ConfigError, match="PLAYA_CONTEXT_TOKENS must be a whole number of tokens"):
            host_config_from_env(args, {"PLAYA_CONTEXT_TOKENS": bad})


def test_the_longest_call_comes_from_playa_call_max_and_is_never_below_the_call_timeout(
    tmp_path: Path,
) -> None:
    config = host_config(tmp_path)
    assert remote_mcp(config, {}, console=True).settings.connection.call_max == 900.0
    given = remote_mcp(config, {"PLAYA_CALL_MAX": "1200"}, console=True).settings.connection
    assert (given.call_timeout, given.call_max) == (60.0, 1200.0)
    longer = remote_mcp(config, {"PLAYA_CALL_TIMEOUT": "1000"}, console=True).settings.connection
    assert longer.call_max == 1000.0


def test_the_approval_interval_comes_from_playa_approval_interval(tmp_path: Path) -> None:
    config = host_config(tmp_path)
    assert remote_mcp(config, {}, console=True).settings.approval_interval == 600.0
    given = remote_mcp(config, {"PLAYA_APPROVAL_INTERVAL": "90"}, console=True).settings
    assert given.approval_interval == 90.0


def test_the_oauth_settings_come_from_the_environment(tmp_path: Path) -> None:
    environ = {
        "MCP_ENCRYPTION_SECRET": "s" * 32,
        "PLAYA_OAUTH_CALLBACK_PORT": "8976",
        "PLAYA_OAUTH_CLIENT_METADATA_URL": "https://example.com/playa/client.json",
        "PLAYA_OAUTH_LOGIN_TIMEOUT": "90",
    }
    extension = remote_mcp(host_config(tmp_path), environ, console=True)
    assert extension.settings.login_timeout == 90.0
    assert extension.settings.oauth_callback_port == 8976
    assert extension.settings.oauth_client_metadata_url == "https://example.com/playa/client.json"
    assert extension.callbacks.redirect_uri_or_placeholder == "http://127.0.0.1:8976/oauth/callback"
    unset = remote_mcp(host_config(tmp_path), {"MCP_ENCRYPTION_SECRET": "s" * 32}, console=True)
    assert (unset.settings.oauth_callback_port, unset.settings.oauth_client_metadata_url) == (0, None)
    assert unset.settings.login_timeout == 600.0


def _playa(*args: str, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "playa", *args],
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", **environ},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_playa_prints_its_client_metadata_document_for_the_operator_to_serve() -> None:
    url = "https://example.com/playa/client.json"
    done = _playa(
        "oauth-client-metadata",
        environ={"PLAYA_OAUTH_CLIENT_METADATA_URL": url, "PLAYA_OAUTH_CALLBACK_PORT": "8976"},
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["client_id"] == url
    assert document["redirect_uris"] == ["http://127.0.0.1:8976/oauth/callback"]
    assert document["token_endpoint_auth_method"] == "none"
    assert document["application_type"] == "native"
    assert document["grant_types"] == ["authorization_code", "refresh_token"]
    # Without a fixed port the loopback redirect has none: the server must take any (RFC 8252 §7.3).
    free = _playa("oauth-client-metadata", environ={"PLAYA_OAUTH_CLIENT_METADATA_URL": url})
    assert json.loads(free.stdout)["redirect_uris"] == ["http://127.0.0.1/oauth/callback"]
    # A Telegram bot with PLAYA_PUBLIC_URL logs in through the webhook's listener as well.
    public = _playa(
        "oauth-client-metadata",
        environ={
            "PLAYA_OAUTH_CLIENT_METADATA_URL": url,
            "PLAYA_PUBLIC_URL": "https://bot.example.org/playa/",
        },
    )
    assert public.returncode == 0, public.stderr
    assert json.loads(public.stdout)["redirect_uris"] == [
        "http://127.0.0.1/oauth/callback",
        "https://bot.example.org/playa/oauth/callback",
    ]
    # One that could carry credentials is refused, and not quoted.
    refused = _playa(
        "oauth-client-metadata",
        environ={
            "PLAYA_OAUTH_CLIENT_METADATA_URL": url,
            "PLAYA_PUBLIC_URL": "https://u:hunter2@bot.example.org",
        },
    )
    assert refused.returncode == 2 and refused.stdout == ""
    assert "PLAYA_PUBLIC_URL must be a plain URL" in refused.stderr and "hunter2" not in refused.stderr


def test_the_client_metadata_document_needs_its_url() -> None:
    done = _playa("oauth-client-metadata", environ={})
    assert done.returncode == 2
    assert done.stdout == ""
    assert "set PLAYA_OAUTH_CLIENT_METADATA_URL" in done.stderr


def test_the_environments_secrets_never_reach_a_log_line() -> None:
    # The encryption secret, a provider's key and an operator's own variable (PLAYA_ENV_DENY): the
    # command teaches the outbound gate their values before anything can log.
    secrets = {
        "MCP_ENCRYPTION_SECRET": "enc-Zq7Xw3KpL9vR2mN8bT4yF6hJ0cD5eG1a",
        "OPENAI_API_KEY": "sk-proj-Vb2Nm4Qw6Er8Ty0Ui1Op3As5Df7Gh9J",
        "MY_BILLING_TOKEN": "bill-Kx9Lz8Mc7Nv6Bq5Wa4Es3Rd2Tf1Yg0H",
    }
    code = (
        "import logging, os, sys\n"
        "from playa.cli import main\n"
        "main(['oauth-client-metadata'])\n"
        "logging.getLogger('anyone').error('leaked: %s', ' '.join(os.environ[n] for n in sys.argv[1:]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *secrets],
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": "/nonexistent",
            "PLAYA_ENV_DENY": "MY_BILLING_TOKEN",
            "PLAYA_OAUTH_CLIENT_METADATA_URL": "https://example.com/playa/client.json",
            **secrets,
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "leaked: [redacted] [redacted] [redacted]" in done.stderr
    for value in secrets.values():
        assert value not in done.stderr and value not in done.stdout


def _audited_chat(data_dir: Path, scope: str, secret: bytes) -> None:
    """A chat's audit log of two records, written as a chat writes it."""

    async def write() -> None:
        async with anyio.create_task_group() as tg:
            log = AuditLog(
                audit_folder(session_state_dir(data_dir, scope)), scope, AuditKey(secret), task_group=tg
            )
            log.record("server_added", server="docs")
            log.record("tool_call", server="docs", tool="search", outcome="ok")
            await log.flush()

    anyio.run(write)


def test_playa_audit_reads_the_console_key_file_and_exports_json_lines(tmp_path: Path) -> None:
    secret = remote_mcp(host_config(tmp_path), {}, console=True)  # generates secret.key
    assert secret.disabled_reason is None
    key = (tmp_path / "secret.key").read_bytes()
    _audited_chat(tmp_path, "console:work", key)
    done = _playa("audit", "verify", "--chat", "console:work", "--data-dir", str(tmp_path), environ={})
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("The audit log of console:work is whole: 2 records, the last #2 at ")
    done = _playa("audit", "export", "--chat", "console:work", "--data-dir", str(tmp_path), environ={})
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["seq"], r["kind"], r["fields"]["server"]) for r in records] == [
        (1, "server_added", "docs"),
        (2, "tool_call", "docs"),
    ]
    assert all(set(r) == {"v", "seq", "time", "kind", "fields", "prev", "mac"} for r in records)


def test_playa_audit_without_a_log_or_a_secret_says_so_and_creates_no_key(tmp_path: Path) -> None:
    done = _playa("audit", "verify", "--chat", "telegram:42", "--data-dir", str(tmp_path), environ={})
    assert done.returncode == 2
    assert "set MCP_ENCRYPTION_SECRET" in done.stderr
    assert not (tmp_path / "secret.key").exists()
    env = {"MCP_ENCRYPTION_SECRET": "s" * 32}
    done = _playa("audit", "verify", "--chat", "telegram:42", "--data-dir", str(tmp_path), environ=env)
    assert done.returncode == 1
    assert done.stderr.strip() == f"playa: chat telegram:42 has no audit log in {tmp_path}"
    # Another host secret: every record fails, and the verifier says why.
    _audited_chat(tmp_path, "telegram:42", b"t" * 32)
    done = _playa("audit", "verify", "--chat", "telegram:42", "--data-dir", str(tmp_path), environ=env)
    assert done.returncode == 1
    assert "breaks at line 1: record 1 does not verify" in done.stderr
    assert "the head record was sealed with another key (the host secret changed)" in done.stderr


def test_the_flow_guard_comes_from_the_environment_and_a_bad_value_says_how_to_fix_it(tmp_path: Path) -> None:
    config = host_config(tmp_path)
    assert remote_mcp(config, {}, console=True).settings.flow_guard is None  # ask in groups, log in private
    for text, mode in (("ask", "ask"), (" LOG ", "log"), ("off", "off")):
        assert remote_mcp(config, {"PLAYA_FLOW_GUARD": text}, console=True).settings.flow_guard == mode
    with pytest.raises(ConfigError, match="PLAYA_FLOW_GUARD must be ask, log or off"):
        remote_mcp(config, {"PLAYA_FLOW_GUARD": "sometimes"}, console=True)


def test_the_workspace_quota_comes_from_the_environment_and_bad_values_are_clear_errors(
    tmp_path: Path,
) -> None:
    assert host_config_from_env(_args(tmp_path), {}).workspace_quota is None
    assert (
        host_config_from_env(_args(tmp_path), {"PLAYA_WORKSPACE_QUOTA": "64M"}).workspace_quota == 64 * 2**20
    )
    assert (
        host_config_from_env(_args(tmp_path), {"PLAYA_WORKSPACE_QUOTA": "500000"}).workspace_quota == 500000
    )
    for bad in ("0", "1.5M", "lots", "5 M"):
        with pytest.raises(ConfigError, match="PLAYA_WORKSPACE_QUOTA must be a whole number of bytes"):
            host_config_from_env(_args(tmp_path), {"PLAYA_WORKSPACE_QUOTA": bad})


def test_a_bot_that_cannot_start_says_why_in_one_line(tmp_path: Path) -> None:
    with socket.socket() as unused:  # a loopback port nobody listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    done = _playa(
        "telegram",
        environ={
            "TELEGRAM_BOT_TOKEN": "123:not-a-real-token-but-shaped-like-one",
            "PLAYA_TELEGRAM_BASE_URL": f"http://127.0.0.1:{port}",
            "PLAYA_DATA_DIR": str(tmp_path),
            "PLAYA_SECRET": "x" * 40,
        },
    )
    assert done.returncode == 2, done.stderr
    assert "playa: cannot reach the Telegram Bot API" in done.stderr
    assert "Traceback" not in done.stderr and "ExceptionGroup" not in done.stderr
    assert "not-a-real-token" not in done.stderr
