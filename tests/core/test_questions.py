"""Which commands run beside a waiting question, and which cancel it first (``beside_a_question``)."""

from __future__ import annotations

from pathlib import Path

from playa.core import beside_a_question, cancelled_for, parse_command
from playa.mcp_remote import HostSecret, RemoteMcpExtension, resolve_host_secret
from support.host import new_host

SHOWS = ("/help", "/mcp_list", "/mcp_tools", "/mcp_tools asking", "/mcp_review", "/mcp_add --help", "/nosuch")
CHANGES = ("/reset", "/stop", "/mcp_add a http://127.0.0.1:9/mcp", "/mcp_remove a", "/mcp_approve a")


def test_commands_that_only_show_run_beside_a_question_and_the_others_cancel_it(tmp_path: Path) -> None:
    secret = resolve_host_secret({"MCP_ENCRYPTION_SECRET": "c" * 32}, data_dir=tmp_path, allow_generate=False)
    assert isinstance(secret, HostSecret)
    commands = new_host(tmp_path, extensions=[RemoteMcpExtension(secret)]).commands
    for text in SHOWS:
        parsed = parse_command(text)
        assert parsed is not None
        assert beside_a_question(parsed, commands, is_owner=True), text
    for text in CHANGES:
        parsed = parse_command(text)
        assert parsed is not None
        assert not beside_a_question(parsed, commands, is_owner=True), text
        # Someone else's is refused without running: it changes nothing, so it cancels nothing.
        assert beside_a_question(parsed, commands, is_owner=False), text


def test_the_note_names_the_command_that_cancelled_the_question() -> None:
    assert cancelled_for("mcp_remove") == "The waiting question was cancelled, so that /mcp_remove can run."
