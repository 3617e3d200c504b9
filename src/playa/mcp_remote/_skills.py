"""A server's skills (the skills extension, SEP-2640): what its entries say, and a file checked against them.

A skill is instructions with files, published by a server that declares the extension: its
``skills/list`` entry names the skill's ``SKILL.md`` (``skill://<path>/SKILL.md``), carries the
front matter, and lists every file with its SHA-256 digest and its size. The entry is what the
owner approves (``skill_digest`` pins it, files' digests included), so a skill whose text
changes after approval changes its entry, and is held like a changed tool.

Files are read only when the agent loads the skill, never ahead of need (not at the connect,
the listing or the approval), and each is checked before anything of it is used: its size,
then its digest; the ``SKILL.md``'s front matter is compared field by field with the entry's.
Any mismatch refuses the skill (``SkillRefused``) and nothing of it reaches the model. A skill
whose files are ``dynamic`` (not listed) cannot be checked, and is not offered.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ..exceptions import SkillRefused
from ._frontmatter import FrontmatterError, frontmatter_of, same_frontmatter
from .store import digest_of
from .transport import Connection, WireSkill, read_file

__all__ = [
    "MAX_SKILL_BYTES",
    "MAX_SKILL_FILES",
    "LoadedSkill",
    "Skill",
    "SkillFile",
    "load_skill",
    "read_skill_file",
    "skill_digest",
    "skills_of",
]

SKILL_MD: Final = "SKILL.md"
MAX_SKILL_FILES: Final = 512
"""Files of one skill at most, as the extension advises servers."""
MAX_SKILL_BYTES: Final = 16 * 1024 * 1024
"""Bytes of one skill's files together at most (16 MiB, as the extension advises servers)."""
_NAME: Final = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*\Z")
_DIGEST: Final = re.compile(r"sha256:[0-9a-f]{64}\Z")
_PATH_PART: Final = re.compile(r"[A-Za-z0-9._~-]+\Z")


@dataclass(frozen=True)
class SkillFile:
    """One file of a skill: its URI, its path inside the skill, and what its bytes must be."""

    uri: str
    path: str
    digest: str
    """``sha256:`` and 64 lower-case hex digits."""
    size: int

    def check(self, data: bytes, *, server: str) -> None:
        """Raise ``SkillRefused`` unless ``data`` is this file: its size first, then its digest."""
        if len(data) != self.size:
            raise SkillRefused(
                f"{self.path} is {len(data):,} bytes, and the skill's entry says {self.size:,}", server=server
            )
        actual = "sha256:" + hashlib.sha256(data).hexdigest()
        if not hmac.compare_digest(actual, self.digest):
            raise SkillRefused(f"{self.path} does not match the digest in the skill's entry", server=server)


@dataclass(frozen=True)
class Skill:
    """A server's skill as its entry describes it, checked against the extension's rules."""

    server: str
    uri: str
    path: str
    """Where the skill is on its server (``skill://<path>/SKILL.md``): how the agent names it."""
    name: str
    description: str
    frontmatter: Mapping[str, Any]
    files: tuple[SkillFile, ...]
    """Every file of the skill, its ``SKILL.md`` first."""
    digest: str
    """The pin of the whole entry (``skill_digest``): what the owner approves."""

    @property
    def skill_md(self) -> SkillFile:
        return self.files[0]

    def file(self, path: str) -> SkillFile | None:
        return next((item for item in self.files if item.path == path), None)


@dataclass(frozen=True)
class LoadedSkill:
    """A skill's ``SKILL.md`` as the agent gets it: checked, its text, and the other files it may read."""

    skill: Skill
    text: str
    others: tuple[str, ...]


def skill_digest(entry: WireSkill) -> str:
    """The pin of a skill's entry: its URI, front matter, and every file's URI, digest and size."""
    files = (
        entry.resources
        if isinstance(entry.resources, str)
        else sorted([item.uri, item.digest, item.size] for item in entry.resources)
    )
    return digest_of(["skill", 1, entry.uri, entry.frontmatter, files])


def _skill(server: str, entry: WireSkill) -> Skill:
    """The entry as a ``Skill``; raises ``SkillRefused`` when it breaks a rule a host relies on."""
    if not entry.uri.startswith("skill://") or not entry.uri.endswith("/" + SKILL_MD):
        raise SkillRefused("its URI is not of the form skill://<path>/SKILL.md", server=server)
    path = entry.uri[len("skill://") : -len("/" + SKILL_MD)]
    parts = path.split("/")
    if not all(_PATH_PART.match(part) and part not in (".", "..") for part in parts):
        raise SkillRefused("its URI has a path Playa does not take", server=server)
    name, description = entry.frontmatter.get("name"), entry.frontmatter.get("description")
    if not isinstance(name, str) or not _NAME.match(name) or len(name) > 64 or name != parts[-1]:
        raise SkillRefused(
            "its name breaks the naming rules, or is not the last part of its URI", server=server
        )
    if not isinstance(description, str) or not description.strip():
        raise SkillRefused("it has no description", server=server)
    if isinstance(entry.resources, str):
        raise SkillRefused(
            "its files are dynamic: they carry no digests to check them against", server=server
        )
    if len(entry.resources) > MAX_SKILL_FILES or sum(item.size for item in entry.resources) > MAX_SKILL_BYTES:
        raise SkillRefused("it is larger than a skill may be", server=server)
    prefix = f"skill://{path}/"
    files: dict[str, SkillFile] = {}
    for item in entry.resources:
        inner = item.uri[len(prefix) :] if item.uri.startswith(prefix) else ""
        if not inner or not all(
            _PATH_PART.match(part) and part not in (".", "..") for part in inner.split("/")
        ):
            raise SkillRefused("it lists a file outside the skill", server=server)
        if not _DIGEST.match(item.digest):
            raise SkillRefused("it lists a file without a SHA-256 digest", server=server)
        if inner in files:
            raise SkillRefused("it lists a file twice", server=server)
        files[inner] = SkillFile(uri=item.uri, path=inner, digest=item.digest, size=item.size)
    if SKILL_MD not in files:
        raise SkillRefused("its files do not include its SKILL.md", server=server)
    ordered = (files.pop(SKILL_MD), *(files[key] for key in sorted(files)))
    return Skill(
        server=server,
        uri=entry.uri,
        path=path,
        name=name,
        description=description,
        frontmatter=dict(entry.frontmatter),
        files=ordered,
        digest=skill_digest(entry),
    )


def skills_of(server: str, entries: Iterable[WireSkill]) -> tuple[dict[str, Skill], list[str]]:
    """A listing's skills by path, and why each other entry is refused (safe to show: Playa's words)."""
    skills: dict[str, Skill] = {}
    refused: list[str] = []
    for index, entry in enumerate(entries):
        try:
            skill = _skill(server, entry)
        except SkillRefused as exc:
            refused.append(f"skill {index + 1} of the listing: {exc.reason}")
            continue
        if skill.path in skills:
            refused.append(f"skill {index + 1} of the listing: another skill has the same URI")
            continue
        skills[skill.path] = skill
    return skills, refused


async def load_skill(connection: Connection, skill: Skill, *, timeout: float) -> LoadedSkill:
    """Read the skill's ``SKILL.md`` and check it (size, digest, front matter); no other file is read.

    Raises:
        SkillRefused: The file is not what the entry says: nothing of it may be used.
        RemoteError: The read failed.
    """
    server = connection.endpoint.server
    data = await read_file(connection, skill.skill_md.uri, timeout=timeout)
    skill.skill_md.check(data, server=server)
    try:
        text = data.decode("utf-8")
        read = frontmatter_of(text)
    except (UnicodeDecodeError, FrontmatterError) as exc:
        raise SkillRefused(f"its SKILL.md has no front matter Playa can read: {exc}", server=server) from None
    if differing := same_frontmatter(read, dict(skill.frontmatter)):
        raise SkillRefused(
            "the front matter of its SKILL.md differs from the skill's entry in " + ", ".join(differing[:8]),
            server=server,
        )
    return LoadedSkill(skill=skill, text=text, others=tuple(item.path for item in skill.files[1:]))


async def read_skill_file(connection: Connection, skill: Skill, path: str, *, timeout: float) -> bytes:
    """One file of the skill, checked against its entry (size, digest).

    Raises:
        SkillRefused: The skill lists no such file, or the file is not what the entry says.
        RemoteError: The read failed.
    """
    server = connection.endpoint.server
    item = skill.file(path)
    if item is None:
        raise SkillRefused(f"the skill {skill.name} lists no file {path!r}", server=server)
    data = await read_file(connection, item.uri, timeout=timeout)
    item.check(data, server=server)
    return data
