"""``/attach <path> [message]`` in the console: a local file into the chat's workspace, judged as a file
sent to the bot is; the console's alone (the host has no such command)."""

from __future__ import annotations

from pathlib import Path

from support.console import chat

KEY = "sk-proj-" + "Q7vR2mXk9LpT4wZs8NcB1yHd6FgJ3aE5uK0oWi"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))


def test_a_file_is_kept_in_the_workspace_and_the_agent_is_told_with_the_message(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "my picture.png").write_bytes(PNG)
    (outside / "settings.env").write_text(f"OPENAI_API_KEY={KEY}\n")
    data = tmp_path / "data"
    done = chat(
        data,
        [
            f"/attach '{outside / 'my picture.png'}' what is in it?",
            f"/attach {outside / 'settings.env'}",
            f"/attach {outside / 'missing.txt'}",
            "/attach",
        ],
    )
    assert done.returncode == 0, done.stderr
    received = data / "workspaces" / "console_3adefault" / "received"
    assert sorted(p.name for p in received.iterdir()) == ["my picture.png"]
    assert (received / "my picture.png").read_bytes() == PNG
    out = done.stdout
    # The agent was told, in the person's turn, where the file is: its history holds what it got.
    history = b"".join(p.read_bytes() for p in (data / "sessions").rglob("*") if p.is_file())
    assert b"what is in it?" in history
    assert b"it is in your workspace at received/my picture.png" in history
    assert KEY.encode() not in history
    assert "That file holds a credential, so it was not kept or shown to the agent." in out
    assert KEY not in out
    assert "Could not read that file: No such file or directory." in out
    assert "usage: /attach <path> [message]" in out
