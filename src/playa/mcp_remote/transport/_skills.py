"""The skills extension on the wire (SEP-2640, ``io.modelcontextprotocol/skills``): list skills, read a file.

A server that declares the extension answers ``skills/list`` with one entry per skill: its URI
(``skill://<path>/SKILL.md``), its front matter as JSON, and every file of the skill with a
SHA-256 digest and a size. The files are ordinary resources, read with ``resources/read``.

This module only speaks: what a listing means, and whether a file is what its entry says, is
the chat's business (``mcp_remote._skills``). Nothing here reads a file on its own: a host must
not fetch a skill's files ahead of need (not on connect, not on listing, not at approval).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Final, Literal

import mcp_types
from pydantic import BaseModel, Field

from ...exceptions import RemoteError
from ._connection import Connection

__all__ = [
    "SKILLS_EXTENSION",
    "ListSkillsRequest",
    "ListSkillsResult",
    "WireSkill",
    "WireSkillFile",
    "list_skills",
    "offers_skills",
    "read_file",
]

SKILLS_EXTENSION: Final = "io.modelcontextprotocol/skills"
MAX_PAGES: Final = 20
"""Pages of ``skills/list`` followed at most: a server whose cursor never ends is cut off there."""


class WireSkillFile(BaseModel):
    """One file of a skill as its entry lists it: where it is, its digest (``sha256:<hex>``) and size in bytes."""

    uri: str
    digest: str
    size: int = Field(ge=0)


class WireSkill(BaseModel):
    """One skill entry as the server sent it (unchecked beyond its shape)."""

    uri: str
    frontmatter: dict[str, Any]
    resources: list[WireSkillFile] | Literal["dynamic"]


class ListSkillsRequest(mcp_types.Request[mcp_types.PaginatedRequestParams, Literal["skills/list"]]):
    method: Literal["skills/list"] = "skills/list"
    params: mcp_types.PaginatedRequestParams


class ListSkillsResult(mcp_types.PaginatedResult):
    skills: list[WireSkill]
    result_type: mcp_types.ResultType = "complete"


def offers_skills(connection: Connection) -> bool:
    """Whether the server declared the skills extension: only then is ``skills/list`` sent."""
    capabilities = connection.capabilities
    return capabilities is not None and SKILLS_EXTENSION in (capabilities.extensions or {})


async def list_skills(connection: Connection, *, timeout: float) -> list[WireSkill]:
    """Every skill the server lists (its pages followed, up to ``MAX_PAGES``); no file is read.

    Raises:
        RemoteError: as ``Connection.send`` (an answer of another shape: the server's error).
    """
    skills: list[WireSkill] = []
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(MAX_PAGES):
        page = await connection.send(
            ListSkillsRequest(params=mcp_types.PaginatedRequestParams(cursor=cursor)),
            ListSkillsResult,
            timeout=timeout,
        )
        skills += page.skills
        cursor = page.next_cursor
        if not cursor or cursor in seen:
            break
        seen.add(cursor)
    return skills


async def read_file(connection: Connection, uri: str, *, timeout: float) -> bytes:
    """The bytes of one file of a skill (``resources/read``): a text's UTF-8, a blob's decoded base64.

    Raises:
        RemoteError: The read failed, or its answer holds no contents for ``uri``.
    """
    result = await connection.send(
        mcp_types.ReadResourceRequest(params=mcp_types.ReadResourceRequestParams(uri=uri)),
        mcp_types.ReadResourceResult,
        timeout=timeout,
    )
    server = connection.endpoint.server
    # Several contents, or another URI's: which bytes the digest covers would be a guess.
    contents = [item for item in result.contents if item.uri == uri]
    if len(contents) != 1:
        raise RemoteError(f"the server's answer holds {len(contents)} contents for the file", server=server)
    (item,) = contents
    if isinstance(item, mcp_types.TextResourceContents):
        return item.text.encode("utf-8")
    try:
        return base64.b64decode(item.blob, validate=True)
    except (binascii.Error, ValueError):
        raise RemoteError("the server sent a file that is not valid base64", server=server) from None
