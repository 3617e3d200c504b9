from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.console import chat


def test_the_console_is_driven_line_by_line_through_a_pipe(tmp_path: Path) -> None:
    done = chat(
        tmp_path,
        [
            "",
            "/help",
            'write_file {"path": "n.txt", "content": "piped"}',
            'read_file {"path": "n.txt"}',
            "read_file {oops",
        ],
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Commands:\n/help — list the commands" in out
    assert "[offline model] write_file returned:\nwrote 5 bytes to n.txt" in out
    assert "[offline model] read_file returned:\npiped" in out
    assert "not valid JSON" in out
    assert (tmp_path / "workspaces" / "console_3adefault" / "n.txt").read_text() == "piped"


def test_a_mistyped_mcp_command_is_answered_by_the_router(tmp_path: Path) -> None:
    done = chat(tmp_path, ["/mcp_whatever --bearer abcdefgh"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Unknown command.")
    assert "whatever" not in done.stdout
    for stored in (tmp_path / "sessions").rglob("*"):
        assert stored.is_dir() or b"abcdefgh" not in stored.read_bytes()


def test_each_console_scope_is_its_own_chat(tmp_path: Path) -> None:
    chat(tmp_path, ['write_file {"path": "mine", "content": "1"}'], "--scope", "one")
    done = chat(tmp_path, ["list_files"], "--scope", "two")
    assert "returned:\n(empty)" in done.stdout


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_version_and_help(flag: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "playa", flag], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0
    assert "playa" in done.stdout


def test_an_unusable_model_is_a_clear_error(tmp_path: Path) -> None:
    done = chat(tmp_path, ["hi"], "--model", "nosuchprovider:model")
    assert done.returncode == 2
    assert "cannot use model 'nosuchprovider:model'" in done.stderr


def test_any_pydantic_ai_model_string_is_taken_from_the_flag_or_the_environment(tmp_path: Path) -> None:
    # "test" is pydantic-ai's own offline test model: it calls every tool once, then reports.
    by_flag = chat(tmp_path / "a", ["hello"], "--model", "test")
    by_env = chat(tmp_path / "b", ["hello"], env={**os.environ, "PLAYA_MODEL": "test"})
    for done in (by_flag, by_env):
        assert done.returncode == 0, done.stderr
        assert '"write_file":"wrote 1 bytes to a"' in done.stdout
        assert "[offline model]" not in done.stdout


@pytest.mark.anyio
async def test_what_servers_and_the_model_write_cannot_drive_the_terminal() -> None:
    import io

    from playa.console import ConsoleUI, printable

    hostile = "result\x1b[2J\x1b[H(hidden) \x1b]0;title\x07\r\x08\u202eevil\x9b31m\tend\nnext"
    assert printable(hostile) == "result[2J[H(hidden) ]0;titleevil31m\tend\nnext"
    out = io.StringIO()
    ui = ConsoleUI(io.StringIO(), out, interactive=False)
    await ui.send(hostile)
    assert "\x1b" not in out.getvalue() and "\r" not in out.getvalue() and "\u202e" not in out.getvalue()


@pytest.mark.anyio
async def test_a_command_is_never_a_secret_answer_and_cancel_ends_the_question() -> None:
    import io

    from playa.console import ConsoleUI

    out = io.StringIO()
    ui = ConsoleUI(io.StringIO("/mcp_list\n\u200b/mcp_add x y\nthe-answer-1234\n"), out, interactive=False)
    assert await ui.ask("Send the token", secret=True) == "the-answer-1234"
    assert out.getvalue().count("A command is not an answer") == 2
    ui = ConsoleUI(io.StringIO("/cancel\nlater-text-12345\n"), io.StringIO(), interactive=False)
    assert await ui.ask("Send the token", secret=True) is None
