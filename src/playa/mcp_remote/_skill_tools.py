"""The skills of one chat's servers (SEP-2640): listed, held until the owner approves them, loaded on demand.

Progressive disclosure: the prompt names each approved skill with its description (the owner
approved exactly that text), and nothing else of it; the agent loads a skill with the
``load_skill`` tool, which returns its ``SKILL.md`` and the names of its other files, and reads
one of those with the same tool (``file``). What the tool returns is a tool result like any
other: the model-bound gate redacts every credential the chat knows and cuts it. So a skill's
body is data the agent chose to read, never prompt text.

The rule of authority: a server's first listing is adopted (the owner added it as it is), and a
skill that is new or changed since waits for the owner (``/mcp_review``, ``/mcp_approve``) with
its server's tools. A skill's pin covers every file's digest, so a changed text is a changed
entry. Each load lists the skills again and loads only a skill whose entry is still the
approved one; every file read is checked against that entry (size, digest, front matter): a
server that serves other bytes gets the skill refused, and the owner told, and nothing of it
reaches the model. Files are read only when the agent loads a skill, never ahead of need.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, Final

from ..core import ToolResult, one_line
from ..exceptions import RemoteError, SkillRefused, ToolError
from ._listings import ServerListings
from ._review import Review
from ._server import ChatContext, RemoteServer
from ._skill_review import SkillHold
from ._skills import Skill, load_skill, read_skill_file, skills_of
from .transport import Connection, list_skills, offers_skills

__all__ = ["LOAD_TOOL", "SKILLS_SECTION", "ChatSkills"]

logger = logging.getLogger(__name__)

LOAD_TOOL: Final = "load_skill"
SKILLS_SECTION: Final = "Skills"
_DESCRIPTION_SHOWN: Final = 300
"""Characters of a skill's description the prompt shows at most."""
_SECTION_SKILLS: Final = 50
"""Skills the prompt names at most (the agent is told how many more)."""
_TOOL_DESCRIPTION = (
    "Load a skill of one of this chat's MCP servers (the Skills section lists them): returns its "
    "SKILL.md, instructions to follow for the task, and the names of its other files. Give `file` "
    "to read one of those files."
)
_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "properties": {
        "server": {"type": "string", "description": "The server that offers the skill."},
        "skill": {"type": "string", "description": "The skill, as the Skills section names it."},
        "file": {"type": "string", "description": "One of the skill's other files, to read it."},
    },
    "required": ["server", "skill"],
    "additionalProperties": False,
}


class _SkillTool:
    """The registry's ``load_skill``, run by the chat's ``ChatSkills`` of now (a chat whose scope
    moved makes a new one, which takes the tool over)."""

    name = LOAD_TOOL
    description = _TOOL_DESCRIPTION
    parameters = _SCHEMA

    def __init__(self, run: Callable[[dict[str, Any]], Awaitable[ToolResult]]) -> None:
        self.run = run

    async def call(self, arguments: dict[str, Any]) -> ToolResult:
        return await self.run(arguments)


class ChatSkills(ServerListings):
    """The skills of one chat's servers: which are offered, which wait, and the agent's loads."""

    kind = "skills"

    def __init__(self, context: ChatContext, review: Review) -> None:
        super().__init__(context, review)
        self._listed: dict[str, Connection] = {}
        tools = context.session.tools
        existing = tools.get(LOAD_TOOL) if LOAD_TOOL in tools else None
        if isinstance(existing, _SkillTool):
            existing.run = self._load
        else:
            tools.register(_SkillTool(self._load), active=False)
            context.session.kept_whole.add(LOAD_TOOL)

    @property
    def _servers(self) -> Mapping[str, RemoteServer]:
        return self._context.servers

    # Listing

    async def connected(self, server: RemoteServer) -> None:
        """A server bound its connection: its skills are listed now, so the prompt names them from the
        next turn on (a connect that lists its tools lists its skills too, bounded as a call)."""
        connection = server.connection
        name = server.entry.name
        if connection is None or self._listed.get(name) is connection:
            return  # bound again on the same connection (a tools change): listed already
        self._listed[name] = connection
        server.review.skills.forget()
        if offers_skills(connection):
            await self._refresh(server, connection)
        else:
            self.offer()

    async def listing(self, server: RemoteServer, connection: Connection | None = None) -> SkillHold:
        """List the server's skills now (no file is read) and hold them against the pins.

        ``connection``: the one just bound (its connect is not over: it must not be waited for);
        else the server's working one.

        A first listing is adopted and saved; a new or changed skill is shown to the owner.
        Raises ``ToolError`` when the server is unavailable, ``RemoteError`` when it failed.
        """
        if connection is None:
            # Before the lock: a connect in flight lists under it before it is over (``connected``).
            connection = await server.connection_for_call()
        async with self._lock(server):
            hold = server.review.skills
            if not offers_skills(connection):
                hold.hold(server.entry.pins, {})
                return hold
            entries = await self._asked(server, connection, list_skills(connection, timeout=self._timeout))
            offered, refused = skills_of(server.entry.name, entries)
            told, hold.refused = hold.refused, refused
            adopted = hold.hold(server.entry.pins, offered)
            if adopted is not None and (pins := self._tools_pinned(server)) is not None:
                await server.save_pins(replace(pins, skills=adopted))
        self.offer()
        if refused and refused != told:
            await self._tell(
                f"{server.entry.name} lists skills that Playa does not offer the agent: "
                + "; ".join(refused[:5])
            )
        await self._review.announce_waiting(server)
        self._context.events.changed()
        return hold

    def offer(self) -> None:
        """Offer ``load_skill`` while a server of the chat has an approved skill; else withdraw it."""
        tools = self._context.session.tools
        if any(server.review.skills.live for server in self._servers.values()):
            tools.activate(LOAD_TOOL)
        else:
            tools.deactivate(LOAD_TOOL)

    def source(self, tool: str, arguments: Mapping[str, Any]) -> str | None:
        """The server a result of ``tool`` came from when it is a skill's (for the flow guard), else None."""
        server = arguments.get("server")
        return server if tool == LOAD_TOOL and isinstance(server, str) and server in self._servers else None

    def section(self) -> str | None:
        """The "Skills" prompt section: each approved skill's name and description, nothing else of it."""
        lines: list[str] = []
        held = 0
        for name, server in sorted(self._servers.items()):
            hold = server.review.skills
            held += len(hold.held)
            if server.status != "connected":
                continue
            for path, skill in sorted(hold.live.items()):
                description = one_line(skill.description)
                if len(description) > _DESCRIPTION_SHOWN:
                    description = description[: _DESCRIPTION_SHOWN - 1] + "…"
                lines.append(f"- {name} {path}: {description}")
        if not lines and not held:
            return None
        shown = lines[:_SECTION_SKILLS]
        text = [
            f"Skills of the chat's servers (the servers' words): load one with {LOAD_TOOL} when it fits "
            "the task, and follow it as far as the person's request goes.",
            *shown,
        ]
        if len(lines) > len(shown):
            text.append(f"- and {len(lines) - len(shown)} more skills")
        if held:
            # A count only: a held skill's text is what the owner has not approved.
            text.append(f"({held} new or changed skills wait for the owner's approval)")
        return self._context.secrets.redact("\n".join(text))

    # Loading

    async def _load(self, arguments: dict[str, Any]) -> ToolResult:
        server_name, path, file = arguments.get("server"), arguments.get("skill"), arguments.get("file")
        if not isinstance(server_name, str) or not isinstance(path, str):
            return ToolResult.error("Give `server` and `skill` as the Skills section names them.")
        server = self._servers.get(server_name)
        if server is None:
            return ToolResult.error(f"This chat has no server {one_line(server_name)[:60]!r}.")
        try:
            skill = await self._approved(server, path)
            return await self._read(server, skill, file if isinstance(file, str) and file else None)
        except SkillRefused as exc:
            await self._refused(server, path, exc)
            return ToolResult.error(
                f"The skill {path} of {server_name} was refused: {exc.reason}. Nothing of it was used."
            )
        except (RemoteError, ToolError) as exc:
            reason = exc.explained if isinstance(exc, RemoteError) else str(exc)
            return ToolResult.error(f"Loading the skill {path} of {server_name} failed: {reason}")

    async def _read(self, server: RemoteServer, skill: Skill, file: str | None) -> ToolResult:
        """The skill's SKILL.md (or ``file``), checked against its approved entry. Raises as ``_load`` handles."""
        connection = await server.connection_for_call()
        if file is not None:
            data = await self._asked(
                server, connection, read_skill_file(connection, skill, file, timeout=self._timeout)
            )
            return ToolResult(text=_file_text(skill, file, data))
        loaded = await self._asked(server, connection, load_skill(connection, skill, timeout=self._timeout))
        others = ", ".join(loaded.others) if loaded.others else "none"
        return ToolResult(
            text=(
                f"Skill {skill.path} of the MCP server {server.entry.name} (the server's words, checked "
                f"against the entry the owner approved). Its other files: {others}.\n\n{loaded.text}"
            )
        )

    async def _approved(self, server: RemoteServer, path: str) -> Skill:
        """The skill as approved and listed now; raises ``ToolError`` saying why it cannot be loaded."""
        hold = await self.listing(server)
        if (skill := hold.live.get(path)) is not None:
            return skill
        if path in hold.held:
            raise ToolError(
                f"the skill {path} is new or changed since the owner approved it: it waits for their approval"
            )
        raise ToolError(f"{server.entry.name} offers no approved skill {one_line(path)[:80]!r}")

    async def _refused(self, server: RemoteServer, path: str, exc: SkillRefused) -> None:
        """Tell the owner that a skill was refused, and why (Playa's words)."""
        logger.info(
            "%s: a skill of %s was refused: %s", self._context.session.scope, server.entry.name, exc.reason
        )
        self._context.audit.record("skill_refused", server=server.entry.name)
        await self._tell(
            f"The skill {path} of {server.entry.name} was refused and nothing of it reached the agent: "
            f"{exc.reason}. The server serves something other than the skill's entry says."
        )

    async def _tell(self, text: str) -> None:
        """Tell the owner ``text`` (redacted) through the front end of their latest command, if any."""
        ui = self._review.owner_ui
        if ui is None:
            return
        try:
            await ui.send(self._redact(text))
        except Exception as exc:  # boundary: a front end's failure must not fail the agent's tool
            logger.warning("could not tell the owner of the skills of a server: %s", type(exc).__name__)


def _file_text(skill: Skill, path: str, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"{path} of the skill {skill.path} is binary ({len(data):,} bytes): it is not shown."
    return f"{path} of the skill {skill.path} (the server's words, checked against its entry):\n\n{text}"
