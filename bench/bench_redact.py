"""Measures the secret redactor against a plain ``str.replace`` loop on 10 MB of tool output.

Part of ``python -m bench`` (``--only redact``); alone: ``PYTHONPATH=src .venv/bin/python -m bench.bench_redact``. Builds a
10 MB ASCII text and a 10 MB text with emoji and accented letters, each with 20 random
~32-character secrets sprinkled through in every encoded form: the literal forms, base64 blobs
that hold a secret at any byte alignment, such blobs wrapped with line breaks (which the
redactor finds by decoding the run), and hex in either case with or without separators. It
times both approaches in alternating runs, checks that the redactor's output holds no encoded
form (nor, once its breaks and separators are dropped, any secret's base64 or hex), and prints
medians, spreads and PASS/MISS against the targets (>= 300 MB/s ASCII, >= 150 MB/s non-ASCII).

The targets are judged on the redactor's rate in process CPU time, so that time spent waiting
for a core while other processes run does not count. Beside each redactor run it times a fixed
pure-Python loop (:func:`reference`), which shows the state of this machine's CPU at that
moment (the VM switches between states ~2.7 times apart in speed), and prints the redactor's
CPU time per 10 MB in loops: a figure that compares runs made in different states on one machine.
It is not a rate on another machine: the redactor's time is part memory traffic, which does not
follow the loop (docs/benchmarks.md, "The redactor"). The plain MB/s (wall clock) are
reported beside it.

The process runs with the ``playa`` command's settings (``playa._runtime``). One of them is the
allocator's: the non-ASCII text is stored at 4 bytes a character, so its redacted copy is a
40 MB string, and without the setting glibc maps each such string afresh, a page fault per
4 KiB page (the page faults of one run are printed).
"""

from __future__ import annotations

import argparse
import base64
import functools
import random
import resource
import statistics
import string
import time
from collections.abc import Callable
from dataclasses import dataclass

from bench._common import Report, Spread, cpu_seconds, reference, verdict
from playa._runtime import tune_runtime
from playa.core.secrets import REDACTED, Redactor, encoded_forms

SIZE = 10_000_000
TARGETS = {"ascii": 300.0, "non-ascii": 150.0}
NAIVE_SIZE = 1_000_000
"""Characters the ``str.replace`` loop is timed on: thousands of forms make it ~0.3 MB/s."""
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
    """Insert an encoded form of some secret about every ``every`` characters.

    Three in ten are base64 blobs that hold a secret at any alignment, two in ten such blobs
    wrapped with line breaks (MIME's 76 columns, PEM's 64, or an odd width; LF or CRLF), one
    in ten its hex (either case, with or without a separator), and the rest its literal forms.
    """
    forms = sorted({form for secret in secrets for form in encoded_forms(secret)})
    pieces: list[str] = []
    at = 0
    while at < len(text):
        step = rng.randint(every // 2, every * 3 // 2)
        pieces.append(text[at : at + step])
        at += step
        kind = rng.random()
        secret = rng.choice(secrets).encode()
        if kind < 0.5:
            before = rng.randbytes(rng.randint(0, 5) if kind < 0.3 else rng.randint(0, 60))
            blob = before + secret + rng.randbytes(rng.randint(0, 5))
            encoder = rng.choice([base64.b64encode, base64.urlsafe_b64encode])
            encoded = encoder(blob).decode().rstrip("=" if rng.random() < 0.5 else "")
            if kind >= 0.3:
                width = rng.choice([76, 64, 57, 23])
                newline = rng.choice(["\n", "\r\n"])
                encoded = newline.join(encoded[at : at + width] for at in range(0, len(encoded), width))
            pieces.append(" " + encoded + " ")
        elif kind < 0.6:
            digits = secret.hex()
            digits = digits.upper() if rng.random() < 0.5 else digits
            separator = rng.choice(["", ":", " ", "-"])
            pieces.append(" " + separator.join(digits[at : at + 2] for at in range(0, len(digits), 2)) + " ")
        else:
            pieces.append(rng.choice(forms))
    return "".join(pieces)


def decoded_leaks(secrets: list[str], text: str) -> list[str]:
    """The secrets whose base64 (at any alignment, either alphabet) or hex ``text`` holds once its
    line breaks and hex separators are dropped and its hex is in lower case."""
    joined = text.replace("\r", "").replace("\n", "").replace("-", "+").replace("_", "/")
    digits = text.lower().translate(str.maketrans("", "", ": -\r\n"))
    leaks = []
    for secret in secrets:
        data = secret.encode()
        cores = [
            base64.b64encode(bytes(pad) + data).decode()[-(-8 * pad // 6) : 8 * (pad + len(data)) // 6]
            for pad in range(3)
        ]
        if any(core in joined for core in cores) or data.hex() in digits:
            leaks.append(secret)
    return leaks


def naive(forms: list[str]) -> Callable[[str], str]:
    def replace_all(text: str) -> str:
        for form in forms:
            text = text.replace(form, REDACTED)
        return text

    return replace_all


def seconds(function: Callable[[], object]) -> float:
    started = time.perf_counter()
    function()
    return time.perf_counter() - started


def page_faults(function: Callable[[str], str], text: str) -> int:
    """Minor page faults of this process while ``function(text)`` runs: fresh memory being written."""
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    function(text)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def rate(function: Callable[[str], str], text: str) -> float:
    return len(text) / seconds(lambda: function(text)) / 1e6


def spread(rates: list[float]) -> str:
    return f"median {statistics.median(rates):8.1f} MB/s  (min {min(rates):.1f}, max {max(rates):.1f}, n={len(rates)})"


@dataclass
class Measured:
    """One text kind's rates (MB/s) for the redactor with and without secrets, and the loop.

    ``cpu`` holds each run's rate in process CPU time (what the targets judge), ``machine`` the
    seconds of CPU time the reference workload took beside it, and ``loops`` the run's CPU time
    per 10 MB over that loop's.
    """

    label: str
    replacements: int
    faults: int
    ours: list[float]
    fast: list[float]
    theirs: list[float]
    cpu: list[float]
    machine: list[float]
    loops: list[float]


def measure(
    runs: int, naive_runs: int, every: int, seed: int, size: int = SIZE
) -> tuple[float, list[Measured]]:
    """Build the texts, check the redactor leaves no form behind, time it; return build time and rates."""
    rng = random.Random(seed)
    secrets = make_secrets(rng)
    forms = sorted({form for secret in secrets for form in encoded_forms(secret)}, key=len, reverse=True)
    started = time.perf_counter()
    redactor = Redactor(secrets)
    redactor._built()  # the block filter, which the first long text would build: timed here
    built = time.perf_counter() - started
    measured = []
    for label, non_ascii in (("ascii", False), ("non-ascii", True)):
        text = sprinkle(rng, filler(rng, size, non_ascii), secrets, every)[:size]
        clean = filler(rng, size, non_ascii)
        assert text.isascii() != non_ascii
        out = redactor.redact(text)
        leaked = [form for form in forms if form in out]
        assert not leaked, "the redactor left an encoded form in its output"
        assert not decoded_leaks(secrets, out), "the redactor left a secret in a run of base64 or hex"
        assert redactor.redact(clean) is clean
        result = Measured(label, out.count(REDACTED), 0, [], [], [], [], [], [])
        del out
        # Alternate so that drift of the machine's speed hits both sides alike.
        for run in range(runs):
            result.ours.append(rate(redactor.redact, text))
            result.fast.append(rate(redactor.redact, clean))
            loop = cpu_seconds(reference)
            cpu = cpu_seconds(functools.partial(redactor.redact, text))
            result.cpu.append(len(text) / cpu / 1e6)
            result.machine.append(loop)
            result.loops.append(cpu / loop * SIZE / len(text))
            if run < naive_runs:
                result.theirs.append(rate(naive(forms), text[:NAIVE_SIZE]))
        # With no result of an earlier run alive, as in the timed runs.
        result.faults = page_faults(redactor.redact, text)
        measured.append(result)
    return built, measured


async def run(quick: bool) -> Report:
    """The runner's entry point (``python -m bench --only redact``)."""
    # The quick run is a smoke run: 2 MB texts (the rate hardly depends on the size).
    size = 2_000_000 if quick else SIZE
    built, measured = measure(3 if quick else 9, 1 if quick else 3, 10000, 1, size)
    report = Report(
        "redact", f"5. Redaction of {size / 1e6:.0f} MB of tool output, 20 secrets in all their encoded forms"
    )
    for result in measured:
        ours, theirs = Spread.of(result.ours), Spread.of(result.theirs)
        cpu = Spread.of(result.cpu)
        target = TARGETS[result.label]
        report.add(
            f"{result.label}, MB/s in process CPU time",
            cpu.text(1, "MB/s", 0),
            "",
            "",
            f"≥ {target:.0f} MB/s",
            verdict(cpu.median >= target),
        )
        report.add(
            f"{result.label}, MB/s by the wall clock, median (p25–p75)",
            ours.text(1, "MB/s", 0),
            theirs.text(1, "MB/s", 2),
            f"{ours.median / theirs.median:.1f}×",
        )
        report.add(f"{result.label}, no secret in the text", Spread.of(result.fast).text(1, "MB/s", 0))
        report.add(
            f"{result.label}, the machine: reference loop", Spread.of(result.machine).text(1e3, "ms", 1)
        )
        report.add(
            f"{result.label}, CPU time per 10 MB in reference loops",
            Spread.of(result.loops).text(1, "loops", 2),
        )
        report.chart[result.label] = {"Redactor": ours, "str.replace loop": theirs}
    report.notes.append(
        f"baseline column: a str.replace loop over every encoded form (on the first {NAIVE_SIZE / 1e6:.0f} MB); "
        "the targets: MB/s in process CPU time, with the reference loop timed beside each run; "
        f"Redactor built in {built * 1e3:.0f} ms; "
        + ", ".join(
            f"{m.label}: {m.replacements} replacements, {m.faults} page faults a run" for m in measured
        )
    )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="redactor runs per text")
    parser.add_argument("--naive-runs", type=int, default=3, help="str.replace runs per text")
    parser.add_argument("--every", type=int, default=10000, help="mean characters between inserted forms")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    tune_runtime()  # as the `playa` command's process runs, and as `python -m bench` runs this
    built, measured = measure(args.runs, args.naive_runs, args.every, args.seed)
    print(f"Redactor built in {built * 1e3:.1f} ms")
    verdicts = []
    for result in measured:
        print(
            f"\n{result.label}: {SIZE / 1e6:.1f} M characters, {result.replacements} replacements, "
            f"no leaked form, {result.faults} page faults a run"
        )
        target = TARGETS[result.label]
        verdict_ = "PASS" if statistics.median(result.cpu) >= target else "MISS"
        verdicts.append(verdict_)
        print(f"  Redactor, in CPU time     {spread(result.cpu)}  target {target:.0f}: {verdict_}")
        print(f"  Redactor, with secrets    {spread(result.ours)}")
        print(f"  Redactor, no secret       {spread(result.fast)}")
        print(f"  str.replace loop          {spread(result.theirs)}")
        print(f"  reference loop            median {statistics.median(result.machine) * 1e3:8.1f} ms")
        print(f"  CPU time per 10 MB        median {statistics.median(result.loops):8.2f} reference loops")
        ratio = statistics.median(result.ours) / statistics.median(result.theirs)
        print(f"  ratio Redactor / str.replace: {ratio:.1f}x")
    print("\nall targets met" if all(v == "PASS" for v in verdicts) else "\nsome target MISSED")


if __name__ == "__main__":
    main()
