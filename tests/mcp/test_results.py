from __future__ import annotations

import base64
import binascii
from typing import Any

import anyio
import mcp
import mcp_types
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from mcp.server.mcpserver import Audio, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

from playa.core import Media, ToolResult
from playa.mcp import map_result
from playa.mcp._results import NO_CONTENT

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(40))
WAV = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(20)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def result(*content: Any, structured: Any = None, is_error: bool = False) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(content=list(content), structured_content=structured, is_error=is_error)


def text(value: str) -> mcp_types.TextContent:
    return mcp_types.TextContent(text=value)


def test_text_blocks_are_joined_in_order() -> None:
    assert map_result(result(text("first"), text("second"))) == ToolResult(text="first\nsecond")


def test_an_image_becomes_media_and_a_placeholder_in_its_place() -> None:
    mapped = map_result(
        result(text("before"), mcp_types.ImageContent(data=b64(PNG), mime_type="image/png"), text("after"))
    )
    assert mapped.media == (Media(PNG, "image/png"),)
    assert mapped.text == f"before\n[image attached: image/png, {len(PNG)} bytes]\nafter"
    assert b64(PNG) not in mapped.text


def test_audio_becomes_media_with_its_mime_type() -> None:
    mapped = map_result(result(mcp_types.AudioContent(data=b64(WAV), mime_type="audio/wav")))
    assert mapped.media == (Media(WAV, "audio/wav"),)
    assert mapped.text == f"[audio attached: audio/wav, {len(WAV)} bytes]"


def test_base64_wrapped_unpadded_or_url_safe_is_still_decoded() -> None:
    data = bytes(range(256)) * 2
    wrapped = "\n".join(b64(data)[i : i + 76] for i in range(0, len(b64(data)), 76))
    unpadded = b64(b"ab")  # "YWI="
    urlsafe = base64.urlsafe_b64encode(data).decode()
    mapped = map_result(
        result(
            mcp_types.ImageContent(data=wrapped, mime_type="image/png"),
            mcp_types.ImageContent(data=unpadded.rstrip("="), mime_type="image/gif"),
            mcp_types.ImageContent(data=urlsafe, mime_type="image/jpeg"),
        )
    )
    assert [m.data for m in mapped.media] == [data, b"ab", data]


def test_an_image_with_invalid_base64_becomes_a_note_instead_of_a_crash() -> None:
    mapped = map_result(result(mcp_types.ImageContent(data="not base64!!", mime_type="image/png")))
    assert mapped.media == ()
    assert mapped.text == "[image (image/png) omitted: its data is not valid base64]"


def test_an_empty_image_is_not_attached() -> None:
    mapped = map_result(result(mcp_types.ImageContent(data="", mime_type="image/png")))
    assert mapped.media == ()
    assert mapped.text == "[image (image/png) omitted: it is empty]"


def test_an_embedded_text_resource_is_shown_with_its_uri() -> None:
    resource = mcp_types.TextResourceContents(uri="file:///notes.md", mime_type="text/markdown", text="# Hi")
    mapped = map_result(result(mcp_types.EmbeddedResource(resource=resource)))
    assert mapped.text == "[resource file:///notes.md (text/markdown)]\n# Hi"


def test_an_embedded_image_blob_is_attached() -> None:
    resource = mcp_types.BlobResourceContents(uri="file:///a.png", mime_type="image/png", blob=b64(PNG))
    mapped = map_result(result(mcp_types.EmbeddedResource(resource=resource)))
    assert mapped.media == (Media(PNG, "image/png"),)
    assert mapped.text == f"[image from file:///a.png attached: image/png, {len(PNG)} bytes]"


def test_an_embedded_binary_blob_is_described_not_dumped() -> None:
    blob = b64(bytes(3000))
    resource = mcp_types.BlobResourceContents(uri="file:///a.zip", mime_type="application/zip", blob=blob)
    mapped = map_result(result(mcp_types.EmbeddedResource(resource=resource)))
    assert mapped.media == ()
    assert mapped.text == "[binary resource file:///a.zip (application/zip, 3000 bytes) not shown]"
    assert blob[:40] not in mapped.text


def test_a_blob_without_mime_type_or_valid_base64_is_still_reported() -> None:
    resource = mcp_types.BlobResourceContents(uri="mem://x", blob="%%%")
    mapped = map_result(result(mcp_types.EmbeddedResource(resource=resource)))
    assert mapped.text == "[binary resource mem://x (unknown type, data not valid base64) not shown]"


def test_a_resource_link_shows_its_name_uri_and_description() -> None:
    link = mcp_types.ResourceLink(
        name="report",
        title="Q3 report",
        uri="https://example.com/r.pdf",
        mime_type="application/pdf",
        size=1234,
        description="The quarterly numbers.",
    )
    mapped = map_result(result(link))
    assert mapped.text == (
        "[resource link report: https://example.com/r.pdf, Q3 report, application/pdf, 1234 bytes]\n"
        "The quarterly numbers."
    )


def test_a_resource_link_says_how_to_open_it_when_the_host_can() -> None:
    link = mcp_types.ResourceLink(name="report", uri="docs://report")
    mapped = map_result(
        result(text("found"), link), link_hint=lambda found: f"(open {found.uri} with the tool)"
    )
    assert mapped.text == "found\n[resource link report: docs://report]\n(open docs://report with the tool)"


def test_structured_content_is_appended_when_the_text_does_not_hold_it() -> None:
    mapped = map_result(result(text("done"), structured={"count": 2, "ok": True}))
    assert mapped.text == 'done\nStructured content:\n{"count":2,"ok":true}'


def test_structured_content_alone_becomes_the_text() -> None:
    assert map_result(result(structured={"a": [1, None]})).text == '{"a":[1,null]}'


def test_structured_content_echoed_in_a_text_block_is_not_repeated() -> None:
    mapped = map_result(
        result(text('{\n  "count": 2,\n  "ok": true\n}'), structured={"ok": True, "count": 2})
    )
    assert mapped.text == '{\n  "count": 2,\n  "ok": true\n}'


def test_structured_content_that_differs_only_by_true_versus_1_is_not_taken_as_echoed() -> None:
    mapped = map_result(result(text('{"ok": 1}'), structured={"ok": True}))
    assert mapped.text == '{"ok": 1}\nStructured content:\n{"ok":true}'


def test_is_error_is_carried_over() -> None:
    mapped = map_result(result(text("no such file"), is_error=True))
    assert mapped == ToolResult(text="no such file", is_error=True)


def test_an_empty_result_says_so() -> None:
    assert map_result(result()) == ToolResult(text=NO_CONTENT)
    assert map_result(result(text(""), text(" "))) == ToolResult(text=NO_CONTENT)
    assert map_result(result(is_error=True)) == ToolResult(text=NO_CONTENT, is_error=True)


def test_an_unknown_content_type_becomes_a_note_with_its_data() -> None:
    class Hologram(BaseModel):
        type: str = "hologram"
        frames: int = 3

    unknown = mcp_types.CallToolResult.model_construct(content=[text("a"), Hologram(), text("b")])
    mapped = map_result(unknown)
    assert mapped.text == 'a\n[unsupported content of type \'hologram\': {"type":"hologram","frames":3}]\nb'


def test_content_that_cannot_be_rendered_as_json_is_still_noted() -> None:
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    mapped = map_result(mcp_types.CallToolResult.model_construct(content=[cyclic], structured_content=cyclic))
    assert mapped.text.startswith("[unsupported content of type 'list': <list that could not be rendered")


class Weather(BaseModel):
    city: str
    celsius: float


def demo_server() -> MCPServer:
    server = MCPServer("demo")

    @server.tool()
    def snapshot() -> Image:
        return Image(data=PNG, format="png")

    @server.tool()
    def chirp() -> Audio:
        return Audio(data=WAV, format="wav")

    @server.tool()
    def weather(city: str) -> Weather:
        return Weather(city=city, celsius=21.5)

    @server.tool()
    def count() -> int:
        return 3

    @server.tool()
    def fail(reason: str) -> str:
        raise ToolError(f"cannot comply: {reason}")

    @server.tool()
    def crash() -> str:
        raise RuntimeError("internal detail")

    @server.tool()
    def bundle() -> list[mcp_types.ContentBlock]:
        return [
            text("see attached"),
            mcp_types.EmbeddedResource(
                resource=mcp_types.TextResourceContents(
                    uri="file:///a.txt", mime_type="text/plain", text="AAA"
                )
            ),
            mcp_types.EmbeddedResource(
                resource=mcp_types.BlobResourceContents(uri="file:///b.bin", blob=b64(b"\x00\x01\x02"))
            ),
            mcp_types.ResourceLink(name="more", uri="file:///more.txt"),
        ]

    return server


async def call(name: str, arguments: dict[str, Any] | None = None) -> ToolResult:
    with anyio.fail_after(10):
        async with mcp.Client(demo_server()) as client:
            return map_result(await client.call_tool(name, arguments or {}))


@pytest.mark.anyio
async def test_an_image_from_a_real_server_arrives_as_media() -> None:
    mapped = await call("snapshot")
    assert mapped == ToolResult(
        text=f"[image attached: image/png, {len(PNG)} bytes]", media=(Media(PNG, "image/png"),)
    )


@pytest.mark.anyio
async def test_audio_from_a_real_server_arrives_as_media() -> None:
    mapped = await call("chirp")
    assert mapped.media == (Media(WAV, "audio/wav"),)


@pytest.mark.anyio
async def test_a_real_servers_structured_output_is_not_repeated_when_echoed_as_text() -> None:
    mapped = await call("weather", {"city": "Oslo"})
    assert mapped.is_error is False
    assert mapped.text.count("Oslo") == 1
    assert "21.5" in mapped.text


@pytest.mark.anyio
async def test_a_real_servers_wrapped_primitive_output_is_not_repeated() -> None:
    # The SDK sends {"result": 3} beside the text "3": the same value, said twice.
    mapped = await call("count")
    assert mapped.text == "3"


@pytest.mark.anyio
async def test_a_tool_error_from_a_real_server_is_an_error_result_with_its_message() -> None:
    mapped = await call("fail", {"reason": "disk full"})
    assert mapped.is_error is True
    assert "cannot comply: disk full" in mapped.text


@pytest.mark.anyio
async def test_a_crash_in_a_real_servers_tool_is_an_error_result() -> None:
    mapped = await call("crash")
    assert mapped.is_error is True
    assert "crash" in mapped.text


@pytest.mark.anyio
async def test_embedded_resources_and_links_from_a_real_server_keep_their_order() -> None:
    mapped = await call("bundle")
    assert mapped.text == (
        "see attached\n"
        "[resource file:///a.txt (text/plain)]\nAAA\n"
        "[binary resource file:///b.bin (unknown type, 3 bytes) not shown]\n"
        "[resource link more: file:///more.txt]"
    )
    assert mapped.media == ()


block_annotations = st.none() | st.builds(
    mcp_types.Annotations, priority=st.none() | st.floats(0, 1), audience=st.none() | st.just(["user"])
)
strings = st.text(max_size=30)
base64ish = st.one_of(st.binary(max_size=64).map(b64), st.text(max_size=30))
mimes = st.one_of(st.sampled_from(["image/png", "audio/wav", "application/octet-stream", ""]), strings)
resources = st.one_of(
    st.builds(mcp_types.TextResourceContents, uri=strings, mime_type=st.none() | mimes, text=strings),
    st.builds(mcp_types.BlobResourceContents, uri=strings, mime_type=st.none() | mimes, blob=base64ish),
)
blocks = st.one_of(
    st.builds(mcp_types.TextContent, text=strings, annotations=block_annotations),
    st.builds(mcp_types.ImageContent, data=base64ish, mime_type=mimes),
    st.builds(mcp_types.AudioContent, data=base64ish, mime_type=mimes),
    st.builds(mcp_types.EmbeddedResource, resource=resources),
    st.builds(
        mcp_types.ResourceLink,
        name=strings,
        uri=strings,
        title=st.none() | strings,
        description=st.none() | strings,
        mime_type=st.none() | mimes,
        size=st.none() | st.integers(0, 10**9),
    ),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | strings,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(strings, children, max_size=3),
    max_leaves=15,
)


def carries(data: str, expected: bytes) -> bool:
    """Whether ``data``, loose base64 as servers send it, decodes to ``expected``; False for non-base64."""
    try:
        return base64.b64decode(data + "==", altchars=b"-_") == expected
    except binascii.Error:
        return False


@settings(max_examples=300)
@given(content=st.lists(blocks, max_size=6), structured=st.none() | json_values, is_error=st.booleans())
# Media from the second block, beside a first block that is not base64 at all.
@example(
    content=[
        mcp_types.ImageContent(data="0000000000000", mime_type="image/png"),
        mcp_types.ImageContent(data="00", mime_type="image/png"),
    ],
    structured=None,
    is_error=False,
)
def test_any_content_maps_without_raising_and_keeps_every_text_in_order(
    content: list[mcp_types.ContentBlock], structured: Any, is_error: bool
) -> None:
    mapped = map_result(result(*content, structured=structured, is_error=is_error))
    assert mapped.is_error is is_error
    assert mapped.text.strip()
    position = 0
    for block in content:
        if isinstance(block, mcp_types.TextContent) and mapped.text != NO_CONTENT:
            position = mapped.text.index(block.text, position) + len(block.text)
    carriers = [
        (b.mime_type, b.data)
        for b in content
        if isinstance(b, mcp_types.ImageContent | mcp_types.AudioContent)
    ] + [
        (b.resource.mime_type, b.resource.blob)
        for b in content
        if isinstance(b, mcp_types.EmbeddedResource)
        and isinstance(b.resource, mcp_types.BlobResourceContents)
    ]
    for media in mapped.media:
        assert media.data
        assert (media.mime_type, b64(media.data)) in carriers or any(
            mime == media.mime_type and carries(data, media.data) for mime, data in carriers
        )
    assert len(mapped.media) == mapped.text.count(" attached: ") or any(
        " attached: " in b.text for b in content if isinstance(b, mcp_types.TextContent)
    )


def test_a_wrapped_string_result_equal_to_the_text_is_not_repeated() -> None:
    result = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text="hello\nworld")],
        structured_content={"result": "hello\nworld"},
    )
    assert map_result(result).text == "hello\nworld"


def test_a_wrapped_result_that_differs_from_the_text_is_kept() -> None:
    result = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text="hello")],
        structured_content={"result": "other"},
    )
    assert '{"result":"other"}' in map_result(result).text


@pytest.mark.parametrize(
    ("texts", "structured"),
    [
        # server-filesystem: the file's text, and the same text as {"content": …}
        (["line one\nline two\n" * 50], {"content": "line one\nline two\n" * 50}),
        # server-memory: the array's JSON, and the array as {"entities": […]}
        (['[\n  {\n    "name": "Ada"\n  }\n]'], {"entities": [{"name": "Ada"}]}),
        # one text block per item of a wrapped array
        (['{"name": "Ada"}', '{"name": "Grace"}'], {"items": [{"name": "Ada"}, {"name": "Grace"}]}),
        (["Ada", "Grace"], {"names": ["Ada", "Grace"]}),
        # the SDK's wrapping of a list return value
        (['["a", 1]'], {"result": ["a", 1]}),
    ],
    ids=["content", "entities-array", "block-per-item", "strings-per-item", "result-list"],
)
def test_structured_content_is_not_sent_twice_whatever_its_wrapping(
    texts: list[str], structured: dict[str, Any]
) -> None:
    result = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text) for text in texts],
        structured_content=structured,
    )
    assert map_result(result).text == "\n".join(texts)


@pytest.mark.parametrize(
    "structured",
    [
        {"content": "line one"},
        {"entities": [{"name": "Ada"}, {"name": "Lovelace"}]},
        {"entities": [{"name": "Ada"}], "count": 1},
    ],
)
def test_wrapped_structured_content_that_says_more_than_the_text_is_kept(structured: dict[str, Any]) -> None:
    result = mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text='[{"name": "Ada"}]')],
        structured_content=structured,
    )
    assert "Structured content:" in map_result(result).text


def test_a_text_longer_than_the_cap_is_cut_with_a_note() -> None:
    result = mcp_types.CallToolResult(content=[mcp_types.TextContent(type="text", text="x" * 5000)])
    mapped = map_result(result, max_text=1000)
    assert mapped.text.startswith("x" * 1000 + "\n[result cut: the tool returned 5,000 characters")
    assert "x" * 1001 not in mapped.text
    assert map_result(result, max_text=5000).text == "x" * 5000
