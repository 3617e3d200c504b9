"""Prometheus's text exposition format 0.0.4, read strictly: what a ``/metrics`` answer must be."""

from __future__ import annotations

import re

__all__ = ["Samples", "parse_exposition"]

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABELS = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"')
_SAMPLE = re.compile(
    r'(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>(?:[^"}]|"(?:[^"\\\n]|\\.)*")*)\})? (?P<value>\S+)'
)
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def parse_exposition(text: str) -> tuple[Samples, dict[str, str]]:
    """Prometheus's text format 0.0.4, strictly: the samples and each family's type.

    Every line is a HELP, a TYPE or a sample; a family is typed once, before its samples; label
    values use only the format's escapes; no sample is given twice; the text ends with a line feed.
    """
    assert text.endswith("\n")
    types: dict[str, str] = {}
    helped: set[str] = set()
    samples: Samples = {}
    for line in text[:-1].split("\n"):
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            assert _NAME.fullmatch(name) and help_text and name not in helped, line
            helped.add(name)
        elif line.startswith("# TYPE "):
            name, _, kind = line[7:].partition(" ")
            assert _NAME.fullmatch(name) and kind in ("counter", "gauge") and name not in types, line
            types[name] = kind
        else:
            match = _SAMPLE.fullmatch(line)
            assert match, f"not a sample: {line!r}"
            name = match["name"]
            assert name in types, f"{name} has no TYPE before its samples"
            labels: set[tuple[str, str]] = set()
            if match["labels"]:
                pairs = _LABELS.findall(match["labels"])
                assert ",".join(f'{k}="{v}"' for k, v in pairs) == match["labels"], line
                labels = {(k, _unescape(v)) for k, v in pairs}
            key = (name, frozenset(labels))
            assert key not in samples, f"twice: {line!r}"
            value = float(match["value"])
            assert value >= 0 and value == int(value), line
            samples[key] = value
    return samples, types


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n"}.get(m[1], m[1]), value)
