"""Prompts of a server written by others: ``@modelcontextprotocol/server-everything`` from npm, run
through the host with pydantic-ai's OpenAI client against a loopback provider that records what
the model got. Its prompts have required and optional arguments, completions that depend on an
argument given before, and embedded resources."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from playa.mcp_remote import HostSecret
from servers.node import server_everything
from support.chat import ScriptedUI, msg
from support.host import remote_host
from support.model_input import user_text
from support.providers import serve_provider, text

pytestmark = [pytest.mark.anyio, pytest.mark.npm]

SCOPE = "console:everything-prompts"


async def test_server_everythings_prompts_are_listed_completed_and_run(
    data_dir: Path, host_secret: HostSecret
) -> None:
    with anyio.fail_after(90):
        async with (
            server_everything("streamable-http") as url,
            serve_provider() as provider,
            remote_host(data_dir, host_secret, provider.model("openai-chat")) as host,
        ):
            session = await host.session(SCOPE, owner="owner")

            async def say(line: str, ui: ScriptedUI | None = None) -> str:
                reply = await host.handle(session, msg(line), ui or ScriptedUI())
                assert reply is not None
                return reply.text

            assert (await say(f"/mcp_add everything {url}")).startswith("Added everything: connected")
            listed = await say("/prompts everything")
            assert "- args-prompt <city> [state] — A prompt with two arguments" in listed
            assert "- completable-prompt <department> <name> — First argument choice narrows" in listed
            assert "- simple-prompt — A prompt with no arguments" in listed

            # Each missing argument is asked for, with the server's completions given what came before.
            provider.script(text("Promoted."))
            ui = ScriptedUI(answers=["Engineering", "Bob"])
            assert await say("/prompt everything completable-prompt", ui) == "Promoted."
            (first, _), (second, _) = ui.asked
            assert "needs department (Choose the department.)" in first
            assert "For example: Engineering, Sales, Marketing, Support." in first
            assert "For example: Alice, Bob, Charlie." in second
            assert "Please promote Bob to the head of the Engineering team." in user_text(provider)

            provider.script(text("Sunny."))
            assert await say('/prompt everything args-prompt city="San Francisco" state=CA') == "Sunny."
            assert "What's weather in San Francisco, CA?" in user_text(provider)

            provider.script(text("Analyzed."))
            await say("/prompt everything resource-prompt resourceType=Text resourceId=1")
            got = user_text(provider)
            assert "Please analyze the following resource:" in got
            assert "Resource 1: This is a plaintext resource created at" in got

            # The server's own error is the person's answer, and nothing reaches the model.
            before = len(provider.requests)
            failed = await say("/prompt everything resource-prompt resourceType=Nothing resourceId=1")
            assert failed.startswith("The prompt resource-prompt of everything failed:")
            assert "Invalid resourceType" in failed
            assert len(provider.requests) == before
