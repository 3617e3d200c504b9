"""A SKILL.md's front matter is read strictly: what Agent Skills write is read as YAML reads it, the rest refused."""

from __future__ import annotations

import pytest

from playa.mcp_remote import FrontmatterError, frontmatter_of, same_frontmatter


def test_the_fields_agent_skills_write_are_read_as_yaml_reads_them() -> None:
    text = """---
name: pdf-processing
description: >
  Extract, fill and
  assemble PDFs.

  Also forms.
license: "Apache-2.0 \\u00e9"
compatibility: 'needs ''pdftk'''
metadata:
  author: acme   # a comment
  version: 1.0
  stable: true
  count: 3
  none: ~
allowed-tools:
- Bash(pdftk:*)
- Read
notes: |-
  line one
    indented
plain: goes on
  over two lines
---

# Body
"""
    assert frontmatter_of(text) == {
        "name": "pdf-processing",
        "description": "Extract, fill and assemble PDFs.\nAlso forms.\n",
        "license": "Apache-2.0 é",
        "compatibility": "needs 'pdftk'",
        "metadata": {"author": "acme", "version": 1.0, "stable": True, "count": 3, "none": None},
        "allowed-tools": ["Bash(pdftk:*)", "Read"],
        "notes": "line one\n  indented",
        "plain": "goes on over two lines",
    }


def test_a_byte_order_mark_and_crlf_lines_are_read() -> None:
    assert frontmatter_of("\ufeff---\r\nname: a\r\ndescription: b\r\n---\r\nbody") == {
        "name": "a",
        "description": "b",
    }


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("no front matter", "does not begin with a front matter block"),
        ("---\nname: a\n", "does not begin with a front matter block"),
        ("---\nname: [a, b]\n---\n", "YAML that Playa does not read"),
        ("---\nname: &anchor a\n---\n", "YAML that Playa does not read"),
        ("---\nname: !!str a\n---\n", "YAML that Playa does not read"),
        ("---\nname: a\nname: b\n---\n", "there twice"),
        ("---\n  name: a\nother: b\n---\n", "not a field"),
        ("---\nname: a: b\n---\n", "quote it"),
        ('---\nname: "open\n---\n', "does not end"),
        ("---\nlist:\n  - a: 1\n---\n", "a map inside a list"),
        ("---\nname:\n\tx: 1\n---\n", "tabs"),
        ("---\n- a\n---\n", "not a map of fields"),
    ],
)
def test_front_matter_playa_cannot_read_for_certain_is_refused_saying_why(text: str, says: str) -> None:
    with pytest.raises(FrontmatterError, match=says):
        frontmatter_of(text)


def test_too_deep_a_nesting_is_refused() -> None:
    text = "---\n" + "".join("  " * depth + f"k{depth}:\n" for depth in range(12)) + "  " * 12 + "v: 1\n---\n"
    with pytest.raises(FrontmatterError, match="nests too deep"):
        frontmatter_of(text)


def test_the_comparison_is_field_by_field_and_tells_types_apart() -> None:
    assert same_frontmatter({"name": "a", "description": "b"}, {"name": "a", "description": "b"}) == []
    assert same_frontmatter({"name": "a"}, {"name": "a", "description": "b"}) == ["description"]
    assert same_frontmatter({"version": 1}, {"version": True}) == ["version"]
    assert same_frontmatter({"version": "1"}, {"version": 1}) == ["version"]
    # Absent and null are the same field value, as the extension compares them.
    assert same_frontmatter({"license": None}, {}) == []
