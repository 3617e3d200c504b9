"""Adversarial tool listings for the name sanitizer: near-collisions and names that squat on hashes."""

from __future__ import annotations

import hashlib
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from playa.mcp import MAX_NAME_LENGTH, exposed_names

VALID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

servers = st.from_regex(r"^[a-z][a-z0-9-]{0,31}$", fullmatch=True).filter(lambda name: name != "mcp")

# Characters a provider refuses, and lookalikes of the ones it accepts.
_UNSAFE = [".", " ", "/", ":", "\t", "é", "\u200b", "\u2010", "\uff3f", "\ud800", "🛠", "\x00"]
_SAFE = ["_", "-", "a", "b", "0"]

# Names that differ only in one refused character: they all sanitize to the same plain name.
near_collisions = st.builds(
    lambda stem, marks, tail: [f"{stem}{mark}{tail}" for mark in marks],
    st.text(alphabet="ab", max_size=3),
    st.lists(st.sampled_from(_UNSAFE + _SAFE), min_size=2, max_size=len(_UNSAFE) + len(_SAFE), unique=True),
    st.text(alphabet="ab", max_size=3),
)
# Long names that share everything the cut keeps, so only the hash can tell them apart.
long_twins = st.builds(
    lambda length, endings: ["n" * length + ending for ending in endings],
    st.integers(MAX_NAME_LENGTH - 12, 220),
    st.lists(st.text(alphabet="xyz.", max_size=4), min_size=2, max_size=6, unique=True),
)


def check(server: str, tools: list[str], names: dict[str, str]) -> None:
    prefix = server + "__"
    assert set(names) == set(tools)
    assert len(set(names.values())) == len(names), "two tools share an exposed name"
    for tool, name in names.items():
        assert VALID.fullmatch(name), name
        assert len(name) <= MAX_NAME_LENGTH
        assert name.startswith(prefix)
        if re.fullmatch(r"[A-Za-z0-9_-]*", tool) and len(prefix + tool) <= MAX_NAME_LENGTH:
            # A well-named tool keeps its name, whatever else the server lists.
            assert name == prefix + tool, (tool, name)


def squatters(server: str, tools: list[str], rounds: int) -> list[str]:
    """Tools named exactly like the hashed names the others got, ``rounds`` times over.

    Each round pushes the tools that got a hashed name to their next attempt, and the one after.
    """
    prefix = server + "__"
    listing = list(tools)
    for _ in range(rounds):
        names = exposed_names(server, listing)
        taken = [name.removeprefix(prefix) for tool, name in names.items() if name != prefix + tool]
        fresh = [name for name in taken if name not in listing]
        if not fresh:
            break
        listing += fresh
    return listing


@settings(max_examples=200, deadline=None)
@given(server=servers, groups=st.lists(near_collisions | long_twins, min_size=1, max_size=6), data=st.data())
def test_near_collisions_get_unique_valid_names_whatever_the_order(
    server: str, groups: list[list[str]], data: st.DataObject
) -> None:
    tools = [tool for group in groups for tool in group]
    names = exposed_names(server, tools)
    check(server, tools, names)
    assert exposed_names(server, data.draw(st.permutations(tools))) == names


@settings(max_examples=150, deadline=None)
@given(
    server=servers,
    groups=st.lists(near_collisions | long_twins, min_size=1, max_size=4),
    rounds=st.integers(1, 4),
    data=st.data(),
)
def test_tools_named_like_hashed_names_never_take_them_from_their_owners_nor_collide(
    server: str, groups: list[list[str]], rounds: int, data: st.DataObject
) -> None:
    tools = squatters(server, [tool for group in groups for tool in group], rounds)
    names = exposed_names(server, tools)
    check(server, tools, names)
    assert exposed_names(server, data.draw(st.permutations(tools))) == names


@settings(max_examples=30, deadline=None)
@given(server=servers, stem=st.text(alphabet="ab.", min_size=1, max_size=4))
def test_a_thousand_tools_that_sanitize_alike_still_get_distinct_names(server: str, stem: str) -> None:
    tools = [f"{stem}{'.' * (i % 7)}{i}{'/' * (i % 3)}" for i in range(1000)]
    tools += [f"{stem}{i}" for i in range(1000)]  # the plain names the others would sanitize to
    names = exposed_names(server, tools)
    check(server, tools, names)


def test_a_chain_of_squatters_pushes_a_tool_to_later_attempts_deterministically() -> None:
    tools = squatters("srv", ["a.b", "a b"], rounds=4)
    assert len(tools) > 3  # the squatters took the first hashed names
    names = exposed_names("srv", tools)
    check("srv", tools, names)
    # "a.b" lost its first hashed name to a squatter, and got another.
    first_try = "srv__a_b_" + hashlib.sha256(b"a.b").hexdigest()[:8]
    assert names[first_try.removeprefix("srv__")] == first_try
    assert names["a.b"] != first_try
    assert names == exposed_names("srv", list(reversed(tools)))
