from __future__ import annotations

import os
import stat
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from playa.mcp_remote.store import HostSecret, NoHostSecret, Sealer, resolve_host_secret

CANARY = "canary-secret-7c41f0d2aa"
TOKEN = "123456:telegram-bot-token-value"


def test_mcp_encryption_secret_comes_first(tmp_path: Path) -> None:
    env = {"MCP_ENCRYPTION_SECRET": CANARY, "TELEGRAM_BOT_TOKEN": TOKEN}
    result = resolve_host_secret(env, data_dir=tmp_path, allow_generate=True)
    assert result == HostSecret(CANARY.encode(), "MCP_ENCRYPTION_SECRET")
    assert list(tmp_path.iterdir()) == []


def test_the_bot_token_is_used_when_there_is_no_encryption_secret(tmp_path: Path) -> None:
    result = resolve_host_secret({"TELEGRAM_BOT_TOKEN": TOKEN}, data_dir=tmp_path, allow_generate=False)
    assert result == HostSecret(TOKEN.encode(), "TELEGRAM_BOT_TOKEN")


def test_an_empty_variable_counts_as_unset(tmp_path: Path) -> None:
    env = {"MCP_ENCRYPTION_SECRET": "", "TELEGRAM_BOT_TOKEN": TOKEN}
    result = resolve_host_secret(env, data_dir=tmp_path, allow_generate=False)
    assert isinstance(result, HostSecret)
    assert result.source == "TELEGRAM_BOT_TOKEN"


def test_a_too_short_secret_is_refused_not_skipped(tmp_path: Path) -> None:
    env = {"MCP_ENCRYPTION_SECRET": "short", "TELEGRAM_BOT_TOKEN": TOKEN}
    result = resolve_host_secret(env, data_dir=tmp_path, allow_generate=True)
    assert result == NoHostSecret("MCP_ENCRYPTION_SECRET is too short: use at least 16 characters")
    assert "short" not in result.reason.replace("too short", "")


def test_a_too_short_bot_token_is_refused(tmp_path: Path) -> None:
    result = resolve_host_secret({"TELEGRAM_BOT_TOKEN": "1:abc"}, data_dir=tmp_path, allow_generate=False)
    assert isinstance(result, NoHostSecret)
    assert "TELEGRAM_BOT_TOKEN is too short" in result.reason


def test_without_a_secret_and_without_generation_remote_mcp_is_unavailable(tmp_path: Path) -> None:
    result = resolve_host_secret({}, data_dir=tmp_path, allow_generate=False)
    assert result == NoHostSecret(
        "set MCP_ENCRYPTION_SECRET (or TELEGRAM_BOT_TOKEN) to enable remote MCP servers"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_console_secret_is_generated_once_with_mode_0600(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    first = resolve_host_secret({}, data_dir=data_dir, allow_generate=True)
    assert isinstance(first, HostSecret)
    assert first.source == "generated"
    assert len(first.value) == 32
    key_file = data_dir / "secret.key"
    assert key_file.read_bytes() == first.value
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert sorted(os.listdir(data_dir)) == ["secret.key"]
    assert resolve_host_secret({}, data_dir=data_dir, allow_generate=True) == first
    Sealer(first.value)  # long enough to seal with


def test_an_environment_secret_wins_over_a_generated_one(tmp_path: Path) -> None:
    resolve_host_secret({}, data_dir=tmp_path, allow_generate=True)
    result = resolve_host_secret({"MCP_ENCRYPTION_SECRET": CANARY}, data_dir=tmp_path, allow_generate=True)
    assert isinstance(result, HostSecret)
    assert result.source == "MCP_ENCRYPTION_SECRET"


def test_processes_racing_to_generate_agree_on_one_key(tmp_path: Path) -> None:
    workers = 8
    barrier = threading.Barrier(workers, timeout=10)

    def resolve() -> HostSecret | NoHostSecret:
        barrier.wait()
        return resolve_host_secret({}, data_dir=tmp_path, allow_generate=True)

    with ThreadPoolExecutor(workers) as pool:
        results = [f.result(timeout=10) for f in [pool.submit(resolve) for _ in range(workers)]]
    assert all(isinstance(r, HostSecret) for r in results)
    assert len({r.value for r in results if isinstance(r, HostSecret)}) == 1
    assert sorted(os.listdir(tmp_path)) == ["secret.key"]


def test_a_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    key_file = tmp_path / "secret.key"
    key_file.write_bytes(os.urandom(32))
    key_file.chmod(0o644)
    result = resolve_host_secret({}, data_dir=tmp_path, allow_generate=True)
    assert isinstance(result, NoHostSecret)
    assert "has mode 0644; it must be 0600" in result.reason


def test_a_key_file_of_the_wrong_size_is_refused_and_kept(tmp_path: Path) -> None:
    key_file = tmp_path / "secret.key"
    key_file.write_bytes(b"x" * 31)
    key_file.chmod(0o600)
    result = resolve_host_secret({}, data_dir=tmp_path, allow_generate=True)
    assert isinstance(result, NoHostSecret)
    assert "is 31 bytes, not 32" in result.reason
    assert key_file.read_bytes() == b"x" * 31


def test_a_key_file_that_is_a_symbolic_link_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(os.urandom(32))
    target.chmod(0o600)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "secret.key").symlink_to(target)
    result = resolve_host_secret({}, data_dir=tmp_path / "data", allow_generate=True)
    assert isinstance(result, NoHostSecret)
    assert "cannot read" in result.reason


def test_a_directory_in_place_of_the_key_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "secret.key").mkdir()
    result = resolve_host_secret({}, data_dir=tmp_path, allow_generate=True)
    assert isinstance(result, NoHostSecret)
    assert "not a regular file" in result.reason


def test_the_secret_never_appears_in_its_repr(tmp_path: Path) -> None:
    result = resolve_host_secret({"MCP_ENCRYPTION_SECRET": CANARY}, data_dir=tmp_path, allow_generate=False)
    assert CANARY not in repr(result)
    assert CANARY not in str(result)
    assert "MCP_ENCRYPTION_SECRET" in repr(result)


@pytest.mark.parametrize("raw", ["pässwörd-0123456789", "bytes-\udcff-0123456789"])
def test_non_ascii_and_undecodable_environment_values_are_used_as_bytes(tmp_path: Path, raw: str) -> None:
    result = resolve_host_secret({"MCP_ENCRYPTION_SECRET": raw}, data_dir=tmp_path, allow_generate=False)
    assert isinstance(result, HostSecret)
    assert result.value == raw.encode("utf-8", "surrogateescape")
