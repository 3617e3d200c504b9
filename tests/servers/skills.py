"""An SDK server that publishes skills (the skills extension, SEP-2640), whose files a test can change.

``skills_server(files)`` builds an ``MCPServer`` that declares ``io.modelcontextprotocol/skills``,
answers ``skills/list`` from ``SkillFiles`` as they are at that moment (each file's digest and
size computed then), and serves each file as a resource. A test that changes a file after the
listing makes the server serve what its entry no longer describes; one that changes it and lists
again makes a changed skill, as a server that redefines a skill after approval would.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import MCPServer
from mcp_types import PaginatedRequestParams

__all__ = ["SkillFiles", "digest", "skill_md", "skills_server"]

SKILLS = "io.modelcontextprotocol/skills"


def digest(data: str) -> str:
    return "sha256:" + hashlib.sha256(data.encode("utf-8")).hexdigest()


def skill_md(name: str, description: str, body: str) -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n\n{body}\n"


@dataclass
class SkillFiles:
    """The skills served: skill path -> (front matter as the entry says it, files by path inside the skill)."""

    skills: dict[str, tuple[dict[str, Any], dict[str, str]]] = field(default_factory=dict)
    reads: list[str] = field(default_factory=list)
    """Every URI read, in order: what was fetched, and when."""
    served_instead: dict[str, str] = field(default_factory=dict)
    """What a read of a URI returns instead of the file its entry describes (a server that lies)."""
    listed: int = 0
    raw_entries: list[dict[str, Any]] = field(default_factory=list)
    """Entries listed as they are, after the others (one that breaks the extension's rules)."""

    def add(self, name: str, description: str, body: str, **others: str) -> None:
        files = {"SKILL.md": skill_md(name, description, body), **others}
        self.skills[name] = ({"name": name, "description": description}, files)

    def entries(self) -> list[dict[str, Any]]:
        return [
            {
                "uri": f"skill://{path}/SKILL.md",
                "frontmatter": frontmatter,
                "resources": [
                    {"uri": f"skill://{path}/{inner}", "digest": digest(text), "size": len(text.encode())}
                    for inner, text in files.items()
                ],
            }
            for path, (frontmatter, files) in self.skills.items()
        ] + self.raw_entries

    def read(self, uri: str) -> str:
        self.reads.append(uri)
        if uri in self.served_instead:
            return self.served_instead[uri]
        path, _, inner = uri.removeprefix("skill://").partition("/")
        return self.skills[path][1][inner]


class _Skills(Extension):
    identifier = SKILLS

    def __init__(self, files: SkillFiles) -> None:
        self._files = files

    def methods(self) -> list[MethodBinding]:
        async def list_skills(ctx: ServerRequestContext[Any, Any], params: Any) -> dict[str, Any]:
            self._files.listed += 1
            return {"skills": self._files.entries(), "ttlMs": 0, "cacheScope": "private"}

        return [MethodBinding("skills/list", PaginatedRequestParams, list_skills)]


def skills_server(files: SkillFiles, *, tools: bool = True) -> MCPServer[Any]:
    """A server with the skills of ``files`` (and one tool, ``echo``, unless ``tools`` is False)."""
    server: MCPServer[Any] = MCPServer("skills", extensions=[_Skills(files)])

    @server.resource("skill://{path}/{inner}", mime_type="text/markdown")
    def skill_file(path: str, inner: str) -> str:
        return files.read(f"skill://{path}/{inner}")

    if tools:

        @server.tool()
        def echo(text: str) -> str:
            """Say it back."""
            return text

    return server
