from __future__ import annotations

import hashlib
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from playa.mcp import MAX_NAME_LENGTH, exposed_name, exposed_names, is_server_name, server_name_problem

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _hash8(original: str) -> str:
    return hashlib.sha256(original.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def test_a_well_formed_tool_name_is_prefixed_with_its_server() -> None:
    assert exposed_name("files", "read_file") == "files__read_file"
    assert exposed_names("files", ["read-file", "Write2"]) == {
        "read-file": "files__read-file",
        "Write2": "files__Write2",
    }


def test_characters_providers_refuse_become_underscores() -> None:
    assert exposed_name("web", "search.query/v2 now") == "web__search_query_v2_now"
    assert exposed_name("web", "café") == "web__caf_"


def test_a_name_longer_than_64_characters_is_cut_and_suffixed_with_a_hash_of_the_original() -> None:
    tool = "x" * 80 + ".long"
    name = exposed_name("srv", tool)
    assert len(name) == MAX_NAME_LENGTH
    assert name == ("srv__" + "x" * 80)[:55] + "_" + _hash8(tool)
    assert exposed_name("srv", tool) == name


def test_a_name_of_exactly_64_characters_is_kept_whole() -> None:
    tool = "t" * (MAX_NAME_LENGTH - len("srv__"))
    assert exposed_name("srv", tool) == "srv__" + tool


def test_long_names_sharing_a_prefix_stay_distinct() -> None:
    tools = ["a" * 70 + "one", "a" * 70 + "two"]
    names = exposed_names("srv", tools)
    assert len(set(names.values())) == 2
    assert all(len(name) == MAX_NAME_LENGTH for name in names.values())


def test_colliding_names_are_told_apart_whatever_order_the_server_lists_them_in() -> None:
    forward = exposed_names("srv", ["a.b", "a b", "a/b"])
    backward = exposed_names("srv", ["a/b", "a b", "a.b"])
    assert forward == backward
    assert len(set(forward.values())) == 3
    # Sorted first among the colliding names keeps the plain name; the others get a hash.
    assert forward["a b"] == "srv__a_b"
    assert forward["a.b"] == "srv__a_b_" + _hash8("a.b")
    assert forward["a/b"] == "srv__a_b_" + _hash8("a/b")


def test_a_name_that_needed_no_sanitizing_keeps_its_plain_name_in_a_collision() -> None:
    names = exposed_names("srv", ["a.b", "a_b"])
    assert names["a_b"] == "srv__a_b"
    assert names["a.b"] == "srv__a_b_" + _hash8("a.b")


def test_a_tool_named_like_another_tools_hashed_name_does_not_steal_it() -> None:
    squatter = "a_b_" + _hash8("a.b")
    names = exposed_names("srv", ["a b", "a.b", squatter])
    assert names[squatter] == "srv__" + squatter
    assert names["a b"] == "srv__a_b"
    assert len(set(names.values())) == 3
    assert all(VALID.fullmatch(name) for name in names.values())
    assert names == exposed_names("srv", [squatter, "a.b", "a b"])


def test_an_empty_tool_name_still_gets_a_valid_unique_name() -> None:
    names = exposed_names("srv", ["", "_", "."])
    assert names[""] == "srv__"
    assert len(set(names.values())) == 3
    assert all(VALID.fullmatch(name) for name in names.values())


def test_duplicate_tool_names_map_to_one_exposed_name() -> None:
    assert exposed_names("srv", ["echo", "echo"]) == {"echo": "srv__echo"}


def test_a_lone_surrogate_in_a_tool_name_is_named_without_error() -> None:
    names = exposed_names("srv", ["bad\ud800", "bad\udc00"])
    assert names["bad\ud800"] != names["bad\udc00"]
    assert all(VALID.fullmatch(name) for name in names.values())


def test_server_mcp_is_refused_so_no_name_starts_with_mcp_prefix() -> None:
    with pytest.raises(ValueError, match="reserved"):
        exposed_names("mcp", ["tool"])


@pytest.mark.parametrize("server", ["", "Files", "a__b", "9lives", "x" * 33, "a.b"])
def test_a_server_name_the_commands_would_refuse_is_refused(server: str) -> None:
    with pytest.raises(ValueError, match="invalid MCP server name"):
        exposed_name(server, "tool")


servers = st.from_regex(r"^[a-z][a-z0-9-]{0,31}$", fullmatch=True).filter(lambda name: name != "mcp")
tool_names = st.one_of(
    st.text(max_size=100),
    st.text(alphabet="ab._ -/", max_size=8),
    st.text(alphabet="a", min_size=55, max_size=70),
    st.text(alphabet=st.characters(codec=None), max_size=10),
)


@given(server=servers, tools=st.lists(tool_names, max_size=30), data=st.data())
def test_any_listing_gets_unique_valid_names_independent_of_order(
    server: str, tools: list[str], data: st.DataObject
) -> None:
    names = exposed_names(server, tools)
    assert set(names) == set(tools)
    assert len(set(names.values())) == len(names)
    for name in names.values():
        assert VALID.fullmatch(name), name
        assert name.startswith(server + "__")
        assert not name.startswith("mcp__")
    shuffled = data.draw(st.permutations(tools))
    assert exposed_names(server, shuffled) == names


@pytest.mark.parametrize("name", ["", "Files", "a__b", "9lives", "x" * 33, "a.b", None, 7])
def test_the_one_server_name_rule_refuses_malformed_names_and_says_the_form(name: object) -> None:
    assert server_name_problem(name) == (
        "the name must be 1-32 characters: a lowercase letter, then lowercase letters, digits or '-'"
    )


def test_the_one_server_name_rule_refuses_the_reserved_mcp_but_lets_it_be_quoted() -> None:
    assert server_name_problem("mcp") == "the name 'mcp' is reserved; choose another"
    assert is_server_name("mcp")
    assert server_name_problem("my-server2") is None
