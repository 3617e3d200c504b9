"""Turn an MCP ``CallToolResult`` into the host's ``ToolResult``.

Every content block becomes text, media or both, in the order the server gave them, and nothing
is dropped without a trace: content the model cannot take (a binary blob, an undecodable image,
a content type this code does not know) becomes a short text note saying what was there.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable

import mcp_types
import pydantic_core

from ..core import Media, ToolResult

__all__ = ["LinkHint", "decode_base64", "map_result"]

NO_CONTENT = "(the tool returned no content)"

_WHITESPACE = re.compile(r"\s+")
_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")
_BASE64_URLSAFE = re.compile(r"^[A-Za-z0-9_-]*={0,2}$")

LinkHint = Callable[[mcp_types.ResourceLink], str]
"""How the model can open a ``resource_link`` (the host's tool for it, through the linking server):
a line added under the link."""


def map_result(
    result: mcp_types.CallToolResult, *, max_text: int | None = None, link_hint: LinkHint | None = None
) -> ToolResult:
    """The host's view of one MCP tool call result. Never raises.

    ``max_text`` caps the text the model receives (in characters); a longer text is cut and
    ends with a note saying so, so the model knows it saw only part. ``link_hint`` says under
    each ``resource_link`` how to open it; without it a link is only described.
    """
    parts: list[str] = []
    media: list[Media] = []
    content: object = getattr(result, "content", None)
    blocks: list[object] = list(content) if isinstance(content, (list, tuple)) else []
    for block in blocks:
        _map_block(block, parts, media, link_hint)

    structured: object = getattr(result, "structured_content", None)
    if structured is not None and not _echoed_in_text(structured, blocks):
        rendered = _to_json_text(structured)
        parts.append(f"Structured content:\n{rendered}" if parts else rendered)

    text = "\n".join(parts)
    if not text or text.isspace():  # no copy of a long text, as ``strip`` would make
        # An empty tool result reads to a model like a lost message; say it was empty.
        text = NO_CONTENT
    if max_text is not None and len(text) > max_text:
        text = f"{text[:max_text]}\n[result cut: the tool returned {len(text):,} characters; this is the first {max_text:,}]"
    return ToolResult(text=text, is_error=getattr(result, "is_error", False) is True, media=tuple(media))


def _map_block(block: object, parts: list[str], media: list[Media], link_hint: LinkHint | None) -> None:
    if isinstance(block, mcp_types.TextContent):
        parts.append(block.text)
    elif isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        parts.append(_attach(block.type, block.data, block.mime_type, media))
    elif isinstance(block, mcp_types.EmbeddedResource):
        parts.append(_embedded(block.resource, media))
    elif isinstance(block, mcp_types.ResourceLink):
        parts.append(_link(block) if link_hint is None else f"{_link(block)}\n{link_hint(block)}")
    else:
        kind = getattr(block, "type", None)
        label = kind if isinstance(kind, str) else type(block).__name__
        parts.append(f"[unsupported content of type {label!r}: {_to_json_text(block)}]")


def _attach(kind: str, data: str, mime_type: str, media: list[Media], *, uri: str | None = None) -> str:
    """Decode base64 media into ``media`` and return the placeholder text for it."""
    where = f" from {uri}" if uri else ""
    shown = mime_type or "unknown type"
    decoded = decode_base64(data)
    if decoded is None:
        return f"[{kind}{where} ({shown}) omitted: its data is not valid base64]"
    if not decoded:
        return f"[{kind}{where} ({shown}) omitted: it is empty]"
    media.append(Media(data=decoded, mime_type=mime_type))
    return f"[{kind}{where} attached: {shown}, {len(decoded)} bytes]"


def _embedded(
    resource: mcp_types.TextResourceContents | mcp_types.BlobResourceContents, media: list[Media]
) -> str:
    mime = resource.mime_type
    if isinstance(resource, mcp_types.TextResourceContents):
        described = f"{resource.uri} ({mime})" if mime else resource.uri
        return f"[resource {described}]\n{resource.text}"
    if mime and mime.lower().startswith("image/"):
        return _attach("image", resource.blob, mime, media, uri=resource.uri)
    # Raw base64 would cost the model many tokens and tell it nothing.
    decoded = decode_base64(resource.blob)
    size = "data not valid base64" if decoded is None else f"{len(decoded)} bytes"
    return f"[binary resource {resource.uri} ({mime or 'unknown type'}, {size}) not shown]"


def _link(link: mcp_types.ResourceLink) -> str:
    details = [link.uri]
    if link.title and link.title != link.name:
        details.append(link.title)
    if link.mime_type:
        details.append(link.mime_type)
    if link.size is not None:
        details.append(f"{link.size} bytes")
    text = f"[resource link {link.name}: {', '.join(details)}]"
    return f"{text}\n{link.description}" if link.description else text


def decode_base64(data: str) -> bytes | None:
    """The bytes of a server's base64 (wrapped, unpadded or URL-safe too), or None when it is not base64."""
    # Some servers wrap base64 at 76 columns, drop padding, or use the URL-safe alphabet;
    # anything beyond that is refused rather than decoded into garbage.
    compact = _WHITESPACE.sub("", data)
    compact += "=" * (-len(compact) % 4)
    try:
        if _BASE64.fullmatch(compact):
            return base64.b64decode(compact, validate=True)
        if _BASE64_URLSAFE.fullmatch(compact):
            return base64.urlsafe_b64decode(compact)
    except (binascii.Error, ValueError):
        return None
    return None


def _echoed_in_text(structured: object, blocks: list[object]) -> bool:
    """Whether the text blocks already hold the structured content, as the MCP spec recommends.

    Servers wrap a value beside its text in one key: the SDK's ``{"result": …}``,
    server-filesystem's ``{"content": <the file's text>}``, server-memory's
    ``{"entities": [...]}`` beside the array's JSON. So the structured content counts as
    echoed when the text holds it, or its one key's value: as that very text, as the same
    JSON, or as an array one text block per item.
    """
    texts = [block.text for block in blocks if isinstance(block, mcp_types.TextContent)]
    if not texts:
        return False
    candidates = [*texts, "".join(texts)] if len(texts) > 1 else texts
    values = [structured]
    if isinstance(structured, dict) and len(structured) == 1:
        values.append(next(iter(structured.values())))
    # The plain text first: most servers echo a string, and parsing a text that is not JSON
    # costs an exception per text.
    for value in values:
        if isinstance(value, str) and value in candidates:
            return True
    parsed = [_parsed(text) for text in candidates]
    for value in values:
        if any(_equal(found, value) for found in parsed):
            return True
        if (
            isinstance(value, list)
            and len(texts) > 1
            and len(value) == len(texts)
            and all(_holds(text, item) for text, item in zip(texts, value, strict=True))
        ):
            return True
    return False


_NOT_JSON = object()


def _parsed(text: str) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        # Not JSON, or nested deeper than Python recurses: not an echo we can confirm.
        return _NOT_JSON


def _holds(text: str, item: object) -> bool:
    if isinstance(item, str) and item == text:
        return True
    return _equal(_parsed(text), item)


def _equal(found: object, value: object) -> bool:
    if found is _NOT_JSON:
        return False
    try:
        return _same_json(found, value)
    except RecursionError:
        # Nested deeper than Python recurses: not an echo we can confirm.
        return False


def _same_json(left: object, right: object) -> bool:
    """JSON equality; unlike ``==`` it tells ``true`` from ``1``."""
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same_json(left[key], right[key]) for key in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same_json(a, b) for a, b in zip(left, right, strict=True))
    if isinstance(left, dict | list) or isinstance(right, dict | list):
        return False
    return left == right


def _to_json_text(value: object) -> str:
    try:
        return pydantic_core.to_json(value, fallback=repr, by_alias=True).decode("utf-8", "replace")
    except (ValueError, TypeError, RecursionError):
        # A cycle, or nesting too deep for pydantic: say what it was rather than lose it.
        return f"<{type(value).__name__} that could not be rendered as JSON>"
