"""Fuzzing the result mapper with what a hostile or broken server can send: it never raises."""

from __future__ import annotations

import base64
from typing import Any

import mcp_types
from hypothesis import given, settings
from hypothesis import strategies as st

from playa.core import Media, ToolResult
from playa.mcp import map_result
from playa.mcp._results import NO_CONTENT

texts = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec=None), max_size=20),  # lone surrogates included
    st.integers(10_000, 2_000_000).map(lambda size: "x" * size),
)
garbage_base64 = st.one_of(
    st.binary(max_size=64).map(lambda data: base64.b64encode(data).decode()),
    st.binary(max_size=64).map(lambda data: base64.urlsafe_b64encode(data).decode().rstrip("=")),
    st.binary(max_size=64).map(
        lambda data: "\n".join(base64.b64encode(data).decode()[i : i + 4] for i in range(0, 88, 4))
    ),
    st.text(alphabet="ABCabc012+/=-_ \n\t%!", max_size=40),
    st.text(max_size=20),
)
mimes = st.one_of(
    st.none(),
    st.sampled_from(["image/png", "IMAGE/PNG", "audio/wav", "", "text/plain"]),
    st.text(max_size=20),
)
uris = st.one_of(st.sampled_from(["file:///a.txt", "https://x.test/r", "", "data:,hi"]), st.text(max_size=30))


def json_values(max_leaves: int = 20) -> st.SearchStrategy[Any]:
    return st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
        lambda children: (
            st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
        ),
        max_leaves=max_leaves,
    )


def nested_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def cyclic() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["self"] = value
    return value


huge_structured = st.one_of(
    st.integers(1, 20_000).map(lambda n: {f"k{i}": i for i in range(n)}),
    st.integers(1, 5_000).map(nested_list),
    st.just(cyclic()),
    st.builds(set, st.lists(st.integers(), max_size=3)),
    st.binary(max_size=10),
    st.just(object()),
)

resources = st.one_of(
    st.builds(mcp_types.TextResourceContents, uri=uris, mime_type=mimes, text=texts),
    st.builds(mcp_types.BlobResourceContents, uri=uris, mime_type=mimes, blob=garbage_base64),
)
blocks = st.one_of(
    st.builds(mcp_types.TextContent, text=texts),
    st.builds(mcp_types.ImageContent, data=garbage_base64, mime_type=mimes.map(lambda m: m or "")),
    st.builds(mcp_types.AudioContent, data=garbage_base64, mime_type=mimes.map(lambda m: m or "")),
    st.builds(mcp_types.EmbeddedResource, resource=resources),
    st.builds(
        mcp_types.ResourceLink,
        name=st.text(max_size=20),
        uri=uris,
        title=st.none() | st.text(max_size=20),
        description=st.none() | texts,
        mime_type=mimes,
        size=st.none() | st.integers(0, 2**63),
    ),
    # Not a content block at all. (A block's own fields are validated by the SDK before this
    # code sees them; a block is taken as its type promises.)
    json_values(5),
    st.builds(object),
)


def check(mapped: object, is_error: object) -> None:
    assert isinstance(mapped, ToolResult)
    assert isinstance(mapped.text, str)
    assert mapped.text.strip()
    assert mapped.is_error is (is_error is True)
    assert isinstance(mapped.media, tuple)
    for media in mapped.media:
        assert isinstance(media, Media)
        assert isinstance(media.data, bytes)
        assert media.data


@settings(max_examples=300, deadline=None)
@given(
    content=st.lists(blocks, max_size=6),
    structured=st.none() | json_values() | huge_structured,
    is_error=st.booleans(),
)
def test_any_valid_or_malformed_content_maps_to_a_tool_result_without_raising(
    content: list[Any], structured: Any, is_error: bool
) -> None:
    result = mcp_types.CallToolResult.model_construct(
        content=content, structured_content=structured, is_error=is_error
    )
    check(map_result(result), is_error)


@settings(max_examples=150, deadline=None)
@given(
    content=st.none() | st.integers() | st.text(max_size=10) | json_values(5) | st.builds(object),
    structured=st.none() | json_values(5),
    is_error=st.none() | st.booleans() | st.integers() | st.text(max_size=5),
)
def test_a_result_whose_fields_have_the_wrong_types_still_maps(
    content: Any, structured: Any, is_error: Any
) -> None:
    result = mcp_types.CallToolResult.model_construct(
        content=content, structured_content=structured, is_error=is_error
    )
    check(map_result(result), is_error)


@settings(max_examples=100, deadline=None)
@given(depth=st.integers(1, 3_000), wrap=st.booleans())
def test_structured_content_echoed_as_deeply_nested_json_text_maps(depth: int, wrap: bool) -> None:
    # The echo check parses the text as JSON: nesting deeper than Python recurses must not escape.
    text = "[" * depth + "]" * depth
    structured: Any = {"result": nested_list(depth)} if wrap else nested_list(depth)
    result = mcp_types.CallToolResult.model_construct(
        content=[mcp_types.TextContent(text=text)], structured_content=structured, is_error=False
    )
    check(map_result(result), False)


def test_an_empty_result_of_any_shape_says_it_is_empty() -> None:
    for content in ([], None, (), [mcp_types.TextContent(text="  \n ")]):
        mapped = map_result(mcp_types.CallToolResult.model_construct(content=content))
        assert mapped.text == NO_CONTENT
