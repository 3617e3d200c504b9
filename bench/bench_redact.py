"""Measures the secret redactor against a plain ``str.replace`` loop on 10 MB of tool output.

Run from the repo root: ``PYTHONPATH=src .venv/bin/python bench/bench_redact.py``. Builds a
10 MB ASCII text and a 10 MB text with emoji and accented letters, each with 20 random
~32-character secrets sprinkled through in every encoded form (including inside larger base64
blobs at all three byte alignments), times both approaches in alternating runs, checks that the
redactor's output holds no encoded form, and prints medians, spreads and PASS/MISS against the
targets (>= 300 MB/s ASCII, >= 150 MB/s non-ASCII).
"""

from __future__ import annotations

import argparse
import base64
import random
import statistics
import string
import time
from collections.abc import Callable

from playa.mcp_remote._redact import REDACTED, Redactor, encoded_forms

SIZE = 10_000_000
TARGETS = {"ascii": 300.0, "non-ascii": 150.0}
SECRET_ALPHABET = string.ascii_letters + string.digits + "-._~+/"
WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "or",
    "from",
    "at",
    "an",
    "not",
    "have",
    "which",
    "result",
    "error",
    "request",
    "response",
    "server",
    "tool",
    "call",
    "content",
    "text",
    "image",
    "value",
    "status",
    "ok",
    "items",
    "count",
    "total",
    "page",
    "next",
    "cursor",
    "id",
    "name",
    "description",
    "created",
    "updated",
    "user",
    "repository",
    "branch",
]
NON_ASCII = ["😀", "🚀", "é", "ü", "ß", "中文", "→", "✓", "Ω"]


def make_secrets(rng: random.Random) -> list[str]:
    secrets = []
    for number in range(20):
        body = "".join(rng.choices(SECRET_ALPHABET, k=rng.randint(30, 34)))
        # A few look like real Authorization values, so their bare credential is a form too.
        secrets.append(f"Bearer {body}" if number % 4 == 0 else body)
    return secrets


def filler(rng: random.Random, size: int, non_ascii: bool) -> str:
    """Tool-output-like text: prose, JSON lines, numbers and unrelated base64."""
    parts: list[str] = []
    total = 0
    while total < size:
        kind = rng.random()
        if kind < 0.6:
            piece = " ".join(rng.choices(WORDS, k=12)) + ". "
        elif kind < 0.9:
            piece = f'{{"id": {rng.randint(0, 10**9)}, "name": "{rng.choice(WORDS)}", "ok": true}}\n'
        else:
            piece = base64.b64encode(rng.randbytes(rng.randint(20, 200))).decode() + "\n"
        if non_ascii and rng.random() < 0.5:
            cut = rng.randint(0, len(piece))
            piece = piece[:cut] + rng.choice(NON_ASCII) + piece[cut:]
        parts.append(piece)
        total += len(piece)
    return "".join(parts)[:size]


def sprinkle(rng: random.Random, text: str, secrets: list[str], every: int) -> str:
    """Insert an encoded form of some secret about every ``every`` characters."""
    forms = sorted({form for secret in secrets for form in encoded_forms(secret)})
    pieces: list[str] = []
    at = 0
    while at < len(text):
        step = rng.randint(every // 2, every * 3 // 2)
        pieces.append(text[at : at + step])
        at += step
        if rng.random() < 0.3:
            secret = rng.choice(secrets).encode()
            blob = rng.randbytes(rng.randint(0, 5)) + secret + rng.randbytes(rng.randint(0, 5))
            encoder = rng.choice([base64.b64encode, base64.urlsafe_b64encode])
            pieces.append(" " + encoder(blob).decode().rstrip("=" if rng.random() < 0.5 else "") + " ")
        else:
            pieces.append(rng.choice(forms))
    return "".join(pieces)


def naive(forms: list[str]) -> Callable[[str], str]:
    def replace_all(text: str) -> str:
        for form in forms:
            text = text.replace(form, REDACTED)
        return text

    return replace_all


def rate(function: Callable[[str], str], text: str) -> float:
    started = time.perf_counter()
    function(text)
    return len(text) / (time.perf_counter() - started) / 1e6


def spread(rates: list[float]) -> str:
    return f"median {statistics.median(rates):8.1f} MB/s  (min {min(rates):.1f}, max {max(rates):.1f}, n={len(rates)})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="redactor runs per text")
    parser.add_argument("--naive-runs", type=int, default=3, help="str.replace runs per text")
    parser.add_argument("--every", type=int, default=10000, help="mean characters between inserted forms")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    secrets = make_secrets(rng)
    forms = sorted({form for secret in secrets for form in encoded_forms(secret)}, key=len, reverse=True)
    started = time.perf_counter()
    redactor = Redactor(secrets)
    built = time.perf_counter() - started
    print(f"{redactor!r}: built in {built * 1e3:.1f} ms")

    verdicts = []
    for label, non_ascii in (("ascii", False), ("non-ascii", True)):
        text = sprinkle(rng, filler(rng, SIZE, non_ascii), secrets, args.every)[:SIZE]
        clean = filler(rng, SIZE, non_ascii)
        assert text.isascii() != non_ascii
        out = redactor(text)
        leaked = [form for form in forms if form in out]
        matches = out.count(REDACTED)
        print(
            f"\n{label}: {len(text) / 1e6:.1f} M characters, {matches} replacements, leaked forms: {len(leaked)}"
        )
        assert not leaked, "the redactor left an encoded form in its output"
        assert redactor(clean) is clean
        ours: list[float] = []
        theirs: list[float] = []
        fast: list[float] = []
        # Alternate so that drift of the machine's speed hits both sides alike.
        for run in range(args.runs):
            ours.append(rate(redactor, text))
            fast.append(rate(redactor, clean))
            if run < args.naive_runs:
                theirs.append(rate(naive(forms), text))
        target = TARGETS[label]
        verdict = "PASS" if statistics.median(ours) >= target else "MISS"
        verdicts.append(verdict)
        print(f"  Redactor, with secrets    {spread(ours)}  target {target:.0f}: {verdict}")
        print(f"  Redactor, no secret       {spread(fast)}")
        print(f"  str.replace loop          {spread(theirs)}")
        print(f"  ratio Redactor / str.replace: {statistics.median(ours) / statistics.median(theirs):.1f}x")
    print("\nall targets met" if all(v == "PASS" for v in verdicts) else "\nsome target MISSED")


if __name__ == "__main__":
    main()
