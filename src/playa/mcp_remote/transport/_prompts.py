"""A server's prompts over one connection: list them (paginated, bounded), render one, complete an argument.

Each is one request beside the tool calls (``Connection.send``), bounded by the call timeout and
translated at the connection's error seam: a transport failure or a timeout breaks the
connection as a call's would. What the answers say is the server's text, untrusted: the caller
checks a prompt's definition against what the owner approved before rendering it.
"""

from __future__ import annotations

import logging
from typing import Final

import mcp_types

from ._connection import Connection

__all__ = [
    "MAX_PROMPT_PAGES",
    "complete_argument",
    "get_prompt",
    "list_prompts",
    "offers_completions",
    "offers_prompts",
]

logger = logging.getLogger(__name__)

MAX_PROMPT_PAGES: Final = 10
"""Pages of a prompt listing read at most; a server that pages on and on gets no more of the host's time."""
MAX_PROMPTS: Final = 500
"""Prompts of one server kept at most: more than a person can pick from."""


def offers_prompts(connection: Connection) -> bool:
    """Whether the server said it has prompts."""
    capabilities = connection.capabilities
    return capabilities is not None and capabilities.prompts is not None


def offers_completions(connection: Connection) -> bool:
    """Whether the server said it completes arguments (``completion/complete``)."""
    capabilities = connection.capabilities
    return capabilities is not None and capabilities.completions is not None


async def list_prompts(connection: Connection, *, timeout: float) -> tuple[mcp_types.Prompt, ...]:
    """The server's prompts, up to ``MAX_PROMPT_PAGES`` pages and ``MAX_PROMPTS`` of them.

    Raises as ``Connection.send`` does.
    """
    prompts: list[mcp_types.Prompt] = []
    cursor: str | None = None
    for _ in range(MAX_PROMPT_PAGES):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor is not None else None
        page = await connection.send(
            mcp_types.ListPromptsRequest(params=params), mcp_types.ListPromptsResult, timeout=timeout
        )
        prompts.extend(page.prompts)
        cursor = page.next_cursor
        if cursor is None or len(prompts) >= MAX_PROMPTS:
            break
    else:
        logger.warning(
            "%s: prompt listing stopped after %d pages", connection.endpoint.server, MAX_PROMPT_PAGES
        )
    # One prompt per name: a server that lists a name twice gets its first definition taken.
    unique: dict[str, mcp_types.Prompt] = {}
    for prompt in prompts[:MAX_PROMPTS]:
        unique.setdefault(prompt.name, prompt)
    return tuple(unique.values())


async def get_prompt(
    connection: Connection, name: str, arguments: dict[str, str], *, timeout: float
) -> mcp_types.GetPromptResult:
    """The server's rendering of its prompt ``name`` with ``arguments``. Raises as ``Connection.send`` does."""
    request = mcp_types.GetPromptRequest(
        params=mcp_types.GetPromptRequestParams(name=name, arguments=arguments)
    )
    return await connection.send(request, mcp_types.GetPromptResult, timeout=timeout)


async def complete_argument(
    connection: Connection, prompt: str, argument: str, value: str, given: dict[str, str], *, timeout: float
) -> mcp_types.Completion:
    """The server's suggestions for ``argument`` of ``prompt``, begun as ``value``, the others ``given``.

    Raises as ``Connection.send`` does.
    """
    params = mcp_types.CompleteRequestParams(
        ref=mcp_types.PromptReference(name=prompt),
        argument=mcp_types.CompletionArgument(name=argument, value=value),
        context=mcp_types.CompletionContext(arguments=given) if given else None,
    )
    result = await connection.send(
        mcp_types.CompleteRequest(params=params), mcp_types.CompleteResult, timeout=timeout
    )
    return result.completion
