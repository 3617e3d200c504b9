"""Tool search: a chat with many tools offers the model a search over them instead of every definition.

Six servers of forty tools would put 240 definitions into every request. Past a budget (more
than ``max_tools`` tools, or definitions taking more than ``max_share`` of the context), the
chat's own workspace tools stay offered whole and the others are deferred: pydantic-ai's
``ToolSearch`` capability gives the model a ``search_tools`` tool, and a tool it finds is
callable at once, in the same turn, and stays offered while that search is in the history sent
(so the tools of recent turns need no new search). Where the provider can hold a tool's
definition out of the context until it is found (Anthropic's ``defer_loading``, OpenAI
Responses' tool search), pydantic-ai uses that; elsewhere a found tool joins the tool list.

The ranking is ours and local (no provider-side search, no network): BM25 over the words of
each tool's name and description, name words counted twice, with plural and verb endings
folded, so "create an event in my calendar" finds ``calendar__create_event``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pydantic_ai.capabilities import ToolSearch
from pydantic_ai.tools import RunContext, ToolDefinition

from ..exceptions import ConfigError

__all__ = ["ToolSearchLimits", "rank_tools", "tool_search"]

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_STOP: Final = frozenset(
    re.findall(
        r"\w+",
        "a an and are as at be by can do for from how i in into is it its me my of on or please "
        "some that the this to use using what with you your",
    )
)
_K1: Final = 1.2
_B: Final = 0.75
_NAME_WEIGHT: Final = 2


@dataclass(frozen=True, kw_only=True)
class ToolSearchLimits:
    """When a chat's tools are offered through a search, and how many results a search gives."""

    max_tools: int = 20
    """More tools than this (the workspace tools aside) are offered through the search."""
    max_share: float = 0.1
    """Definitions taking more than this share of the context are offered through the search."""
    results: int = 5
    """Tools one search returns, best first."""

    def __post_init__(self) -> None:
        if self.max_tools < 0 or self.results < 1 or not 0 < self.max_share <= 1:
            raise ConfigError(f"impossible tool search limits: {self!r}")


def _stem(word: str) -> str:
    for suffix, replacement in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            return word[: len(word) - len(suffix)] + replacement
    return word


def words(text: str) -> list[str]:
    """The search words of ``text``: split at case changes and punctuation, lowercased, stemmed."""
    found = (w.lower() for w in _WORD.findall(text))
    return [_stem(w) for w in found if w not in _STOP]


def _terms(tool: ToolDefinition) -> Counter[str]:
    terms = Counter(words(tool.description or ""))
    for word in words(tool.name):
        terms[word] += _NAME_WEIGHT
    return terms


def rank_tools(queries: Iterable[str], tools: Sequence[ToolDefinition]) -> list[str]:
    """The names of ``tools`` that match ``queries``, best first (BM25; ties in the given order)."""
    query = set(words(" ".join(queries)))
    if not query or not tools:
        return []
    documents = [_terms(tool) for tool in tools]
    average = sum(sum(d.values()) for d in documents) / len(documents) or 1.0
    frequency = Counter(word for d in documents for word in d.keys() & query)
    scores: list[tuple[float, int]] = []
    for index, terms in enumerate(documents):
        length = sum(terms.values())
        score = 0.0
        for word in query & terms.keys():
            idf = math.log(1 + (len(documents) - frequency[word] + 0.5) / (frequency[word] + 0.5))
            tf = terms[word]
            score += idf * tf * (_K1 + 1) / (tf + _K1 * (1 - _B + _B * length / average))
        if score > 0:
            scores.append((-score, index))
    scores.sort()
    return [tools[index].name for _, index in scores]


def _strategy(ctx: RunContext[Any], queries: Sequence[str], tools: Sequence[ToolDefinition]) -> list[str]:
    return rank_tools(queries, tools)


_DESCRIPTION = (
    "Search this chat's tools by what they do. Only some tools are listed directly; when none of "
    "them fits the task, search with a few words naming the action and the thing it acts on "
    "(e.g. 'create calendar event'). The tools found can be called right away."
)


def tool_search(limits: ToolSearchLimits) -> ToolSearch[Any]:
    """Pydantic-ai's tool search capability with Playa's local ranking."""
    return ToolSearch(strategy=_strategy, max_results=limits.results, tool_description=_DESCRIPTION)
