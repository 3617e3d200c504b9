from __future__ import annotations

import base64
import itertools
import json
import random
from urllib.parse import quote, quote_plus, urlencode

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from playa.core.secrets import (
    MIN_SECRET_LENGTH,
    REDACTED,
    Redactor,
    _blocks,
    _redact,
    auth_credential,
    encoded_forms,
)

CANARY = "Bearer cAnAry-7Qx9+/z=Kp2_vW8~tL5"
TOKEN = "cAnAry-7Qx9+/z=Kp2_vW8~tL5"
API_KEY = "k3y-value-long"
AWKWARD = 'pä"ss\\wörd/🔑+key&x=1'


# Every test runs with each search (see conftest), unless it asks for one.
pytestmark = pytest.mark.usefixtures("search")


def reference_redact(secrets: list[str], text: str) -> str:
    """What redaction must produce: every occurrence of every form, overlaps merged, found naively."""
    forms = {form for secret in secrets for form in encoded_forms(secret)}
    spans = []
    for form in forms:
        at = text.find(form)
        while at >= 0:
            spans.append((at, at + len(form)))
            at = text.find(form, at + 1)
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    out, done = [], 0
    for start, end in merged:
        out += [text[done:start], REDACTED]
        done = end
    return "".join([*out, text[done:]])


def leaked(secret: str, text: str) -> list[str]:
    return [form for form in encoded_forms(secret) if form in text]


def filler(size: int, *, non_ascii: bool = False) -> str:
    words = ["result", "tool", "😀" if non_ascii else "ok", "id=42", '{"a": 1}', "ü" if non_ascii else "x"]
    out: list[str] = []
    length = index = 0
    while length < size:
        out.append(words[index % len(words)] + " ")
        length += len(out[-1])
        index += 7
    return "".join(out)


def test_every_encoded_form_of_a_header_value_is_redacted_inside_text() -> None:
    redactor = Redactor([CANARY])
    forms = sorted(encoded_forms(CANARY))
    assert len(forms) > 20
    missed = [form for form in forms if redactor.redact(f"before {form} after") != f"before {REDACTED} after"]
    assert missed == []


def test_encoded_forms_cover_the_value_the_credential_and_each_encoding() -> None:
    forms = encoded_forms(CANARY)
    for secret in (CANARY, TOKEN):
        raw = secret.encode()
        assert {
            secret,
            quote(secret, safe=""),
            quote_plus(secret),
            json.dumps(secret)[1:-1],
            base64.b64encode(raw).decode(),
            base64.b64encode(raw).decode().rstrip("="),
            base64.urlsafe_b64encode(raw).decode(),
            base64.urlsafe_b64encode(raw).decode().rstrip("="),
        } <= forms
    assert all(len(form) >= MIN_SECRET_LENGTH for form in forms)


@pytest.mark.parametrize("urlsafe", [False, True], ids=["standard", "urlsafe"])
def test_base64_of_a_larger_blob_holding_the_secret_is_redacted_at_every_alignment(urlsafe: bool) -> None:
    # Every alignment of the secret in the blob (twice each), every length of what follows it,
    # with and without padding.
    redactor = Redactor([CANARY])
    for before, after, padded in itertools.product(range(6), range(3), (False, True)):
        blob = bytes(range(200, 200 + before)) + TOKEN.encode() + b"\xfe\x01\x7f"[:after]
        encoded = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(blob).decode()
        if not padded:
            encoded = encoded.rstrip("=")
        text = f'{{"data": "{encoded}"}}'
        out = redactor.redact(text)
        assert REDACTED in out, (before, after, padded)
        assert leaked(TOKEN, out) == [], (before, after, padded)
        # What is left of the blob is at most the bytes around the secret: two characters of
        # bits shared with the neighbours on each side, plus those neighbours' own characters.
        kept = out.replace('{"data": "', "").replace('"}', "").replace(REDACTED, "")
        assert len(kept) <= -(-before * 4 // 3) + -(-after * 4 // 3) + 4, (before, after, padded)


def test_percent_encoded_secret_in_a_url_query_is_redacted() -> None:
    secret = "p@ss/w0rd+key=&?#"
    redactor = Redactor([secret])
    for url in (
        "https://example.test/cb?" + urlencode({"token": secret, "x": "1"}),
        f"https://example.test/cb?token={quote(secret, safe='')}&x=1",
        f"https://example.test/{quote(secret)}/x",
    ):
        out = redactor.redact(url)
        assert REDACTED in out
        assert leaked(secret, out) == []
        assert out.endswith("x=1") or out.endswith("/x")


@pytest.mark.parametrize("secret", [TOKEN, CANARY, AWKWARD])
def test_a_secret_with_every_byte_escaped_in_either_case_is_an_encoded_form(secret: str) -> None:
    forms = encoded_forms(secret)
    for value in (secret, auth_credential(secret) or secret):
        upper = "".join(f"%{byte:02X}" for byte in value.encode("utf-8"))
        assert {upper, upper.lower()} <= forms
        out = Redactor([secret]).redact(f"a={upper}&b={upper.lower()}&c=1")
        assert out == f"a={REDACTED}&b={REDACTED}&c=1"


def test_a_secret_holding_escapes_of_mixed_case_is_redacted_with_them_lowered() -> None:
    secret = "tok%aF%2f%3Dvalue-long"  # a value that was itself percent-encoded, in mixed case
    assert "tok%af%2f%3dvalue-long" in encoded_forms(secret)
    out = Redactor([secret]).redact("one tok%aF%2f%3Dvalue-long two tok%af%2f%3dvalue-long three")
    assert out == f"one {REDACTED} two {REDACTED} three"


@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_json_escaped_secret_with_quotes_backslashes_and_non_ascii_is_redacted(ensure_ascii: bool) -> None:
    redactor = Redactor([AWKWARD])
    document = json.dumps({"headers": {"X-Api-Key": AWKWARD}, "n": 1}, ensure_ascii=ensure_ascii)
    out = redactor.redact(document)
    assert json.loads(out) == {"headers": {"X-Api-Key": REDACTED}, "n": 1}


def test_non_ascii_secret_is_redacted_in_non_ascii_text() -> None:
    redactor = Redactor([AWKWARD])
    raw = base64.b64encode(AWKWARD.encode()).decode()
    out = redactor.redact(f"ключ 🔑 {AWKWARD} 中文 {raw} ✓")
    assert out == f"ключ 🔑 {REDACTED} 中文 {REDACTED} ✓"


def test_the_bare_credential_after_an_auth_scheme_is_redacted_too() -> None:
    redactor = Redactor(["Bearer abcdefgh12345", "Token zyxwvuts9876", "X-Custom_1 q1w2e3r4t5"])
    out = redactor.redact("I saw abcdefgh12345, then zyxwvuts9876 and q1w2e3r4t5.")
    assert out == f"I saw {REDACTED}, then {REDACTED} and {REDACTED}."


def test_auth_credential_needs_a_token_scheme_and_exactly_one_space() -> None:
    assert auth_credential("Bearer abc") == "abc"
    assert auth_credential("Basic dXNlcjpwYXNz") == "dXNlcjpwYXNz"
    assert auth_credential("k3y-value-long") is None
    assert auth_credential("Bearer  two-spaces") is None
    assert auth_credential("a(scheme) credential") is None
    assert auth_credential("Digest realm=x, nonce=y") == "realm=x, nonce=y"


def test_the_longest_match_wins_so_no_part_of_a_header_is_left_behind() -> None:
    redactor = Redactor(["Bearer abcdefgh12345"])
    assert redactor.redact("Authorization: Bearer abcdefgh12345\n") == f"Authorization: {REDACTED}\n"


def test_overlapping_secrets_are_replaced_as_one_span() -> None:
    redactor = Redactor(["AAAABBBBCCCC", "CCCCDDDDEEEE"])
    assert redactor.redact("x AAAABBBBCCCCDDDDEEEE y") == f"x {REDACTED} y"


def test_text_without_secrets_is_returned_unchanged_as_the_same_object() -> None:
    redactor = Redactor([CANARY, API_KEY])
    for text in ("", "short", filler(100_000), filler(100_000, non_ascii=True)):
        assert redactor.redact(text) is text
        assert not redactor.contains(text)


def test_contains_tells_whether_redact_would_change_the_text() -> None:
    redactor = Redactor([API_KEY])
    assert redactor.contains(f"the key is {API_KEY}")
    assert redactor.contains(filler(50_000) + base64.b64encode(API_KEY.encode()).decode())
    assert not redactor.contains("the key is k3y-value-lon")


def test_an_empty_redactor_is_false_and_returns_text_untouched() -> None:
    text = filler(10_000)
    for redactor in (Redactor.EMPTY, Redactor(), Redactor([])):
        assert not redactor
        assert redactor.redact(text) is text
        assert not redactor.contains(text)
    assert Redactor([API_KEY])


def test_values_shorter_than_the_minimum_are_ignored_and_counted() -> None:
    redactor = Redactor(["abc1234", "", API_KEY])
    assert repr(redactor).endswith(", 2 too short>")
    assert redactor.redact("abc1234 and k3y-value-long") == f"abc1234 and {REDACTED}"
    assert encoded_forms("abc1234") == set()
    assert not Redactor(["abc1234"])


def test_a_short_credential_after_a_scheme_is_not_redacted_on_its_own() -> None:
    redactor = Redactor(["Bearer abc"])
    assert redactor.redact("Bearer abc, abc") == f"{REDACTED}, abc"


def test_repr_shows_counts_and_never_a_secret_or_a_form() -> None:
    redactor = Redactor([CANARY, API_KEY, "tiny"])
    text = repr(redactor)
    assert "2 secrets" in text
    assert "1 too short" in text
    forms = encoded_forms(CANARY) | encoded_forms(API_KEY)
    assert not any(form in text for form in forms)
    assert not any(form[:6] in text for form in forms)


def test_a_question_mark_in_a_secret_does_not_match_other_non_ascii_characters() -> None:
    redactor = Redactor(["what?is?this?key?"])
    text = "what😀is😀this😀key😀 " * 3
    assert redactor.redact(text) is text
    assert redactor.redact("what?is?this?key?") == REDACTED


@pytest.mark.parametrize("non_ascii", [False, True])
def test_forms_are_found_at_every_alignment_across_a_large_text(non_ascii: bool) -> None:
    # Large enough for many scan spans; the irregular gap puts the forms at every offset
    # relative to the sampled blocks and across span boundaries.
    secrets = [API_KEY, "Bearer " + "Zq8" * 11, "a-much-longer-secret-value-" + "x7" * 20]
    forms = sorted({form for secret in secrets for form in encoded_forms(secret)})
    pieces = []
    for index in range(600):
        pieces += [filler(100 + index % 97, non_ascii=non_ascii), forms[index % len(forms)]]
    text = "".join(pieces)
    out = Redactor(secrets).redact(text)
    assert out == reference_redact(secrets, text)
    assert not any(form in out for form in forms)


def test_many_secrets_of_mixed_lengths_are_all_redacted() -> None:
    secrets = [chr(ord("A") + n) * 3 + "-" + "0123456789abcdef"[: 4 + n] for n in range(16)]
    text = filler(20_000).join(secrets + [base64.b64encode(s.encode()).decode() for s in secrets])
    out = Redactor(secrets).redact(text)
    assert out == reference_redact(secrets, text)
    assert not any(leaked(secret, out) for secret in secrets)


def test_a_long_secret_such_as_a_jwt_is_redacted_in_every_form() -> None:
    jwt = "eyJhbGciOiJSUzI1NiJ9." + "QWxhZGRpbjpvcGVuIHNlc2FtZQ" * 60 + ".c2lnbmF0dXJl"
    secrets = ["Bearer " + jwt]
    forms = sorted(encoded_forms(secrets[0]))
    text = filler(30_000).join(forms)
    out = Redactor(secrets).redact(text)
    assert out == reference_redact(secrets, text)
    assert out.count(REDACTED) == len(forms)


# Secrets never contain the characters of REDACTED's brackets: a form that did could be rebuilt
# across the edge of a replacement, which no redactor can prevent.
secret_text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="[]"),
    min_size=MIN_SECRET_LENGTH,
    max_size=40,
)
surrounding = st.text(alphabet=st.characters(codec="utf-8"), max_size=300)


def sound(secret: str) -> bool:
    return not any(form in REDACTED for form in encoded_forms(secret))


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(secret=secret_text, before=surrounding, after=surrounding, data=st.data())
def test_no_encoded_form_survives_in_random_text(
    secret: str, before: str, after: str, data: st.DataObject
) -> None:
    assume(sound(secret))
    form = data.draw(st.sampled_from(sorted(encoded_forms(secret))))
    out = Redactor([secret]).redact(before + form + after)
    assert REDACTED in out
    assert leaked(secret, out) == []


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(
    secret=secret_text,
    before=st.binary(max_size=7),
    after=st.binary(max_size=7),
    urlsafe=st.booleans(),
    padded=st.booleans(),
    text=surrounding,
)
def test_no_encoded_form_survives_base64_of_any_blob_holding_the_secret(
    secret: str, before: bytes, after: bytes, urlsafe: bool, padded: bool, text: str
) -> None:
    assume(sound(secret))
    encode = base64.urlsafe_b64encode if urlsafe else base64.b64encode
    blob = encode(before + secret.encode("utf-8") + after).decode()
    out = Redactor([secret]).redact(text + (blob if padded else blob.rstrip("=")) + text)
    assert REDACTED in out
    assert leaked(secret, out) == []


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(secrets=st.lists(secret_text, min_size=1, max_size=4), data=st.data())
def test_redaction_equals_a_naive_search_for_every_form(secrets: list[str], data: st.DataObject) -> None:
    # Text made of overlapping fragments of forms and noise exercises merging and near misses.
    forms = sorted({form for secret in secrets for form in encoded_forms(secret)})
    pieces = data.draw(
        st.lists(
            st.one_of(
                surrounding,
                st.sampled_from(forms),
                st.sampled_from(forms).map(lambda form: form[1:]),
                st.sampled_from(forms).map(lambda form: form[:-1]),
            ),
            max_size=12,
        )
    )
    text = "".join(pieces)
    assert Redactor(secrets).redact(text) == reference_redact(secrets, text)


def text_of(length: int, *, non_ascii: bool) -> str:
    unit = filler(997, non_ascii=non_ascii)
    return (unit * (length // len(unit) + 1))[:length]


@pytest.mark.parametrize("non_ascii", [False, True])
def test_forms_across_the_edges_of_the_scanned_chunks_are_redacted(non_ascii: bool) -> None:
    # The text is encoded and scanned _CHUNK characters at a time; put one form at each edge,
    # from wholly before it (touching) to crossing it by one character either way, to wholly after.
    secrets = [CANARY, API_KEY]
    forms = sorted({form for secret in secrets for form in encoded_forms(secret)}, key=len)
    placed = [
        (form, shift)
        for form in (forms[0], forms[len(forms) // 2], forms[-1])
        for shift in (-len(form) - 1, -len(form), -len(form) + 1, -len(form) // 2, -1, 0, 1)
    ]
    pieces, length = [], 0
    for index, (form, shift) in enumerate(placed):
        at = (index + 1) * _blocks._CHUNK + shift
        pieces += [text_of(at - length, non_ascii=non_ascii), form]
        length = at + len(form)
    text = "".join([*pieces, text_of(100, non_ascii=non_ascii)])
    redactor = Redactor(secrets)
    out = redactor.redact(text)
    assert out == reference_redact(secrets, text)
    assert out.count(REDACTED) == len(placed)
    edge = _blocks._CHUNK
    only_across = text_of(edge - 5, non_ascii=non_ascii) + API_KEY + text_of(100, non_ascii=non_ascii)
    assert redactor.contains(only_across)


@pytest.mark.parametrize("non_ascii", [False, True])
def test_text_between_matches_that_runs_across_several_chunks_is_kept_whole(non_ascii: bool) -> None:
    middle = text_of(3 * _blocks._CHUNK + 123, non_ascii=non_ascii)
    text = f"{API_KEY}{middle}{TOKEN}é{API_KEY}"
    out = Redactor([CANARY, API_KEY]).redact(text)
    assert out == f"{REDACTED}{middle}{REDACTED}é{REDACTED}"


def test_ascii_and_non_ascii_texts_are_redacted_alike() -> None:
    # ASCII text is sliced as it is; any other is redacted in its UTF-8 and decoded back.
    secrets = [CANARY, AWKWARD]
    forms = sorted({form for secret in secrets for form in encoded_forms(secret)})
    ascii_forms = [form for form in forms if form.isascii()]
    for words, used in ((filler(300), ascii_forms), (filler(300, non_ascii=True), forms)):
        text = words.join(used)
        out = Redactor(secrets).redact(text)
        assert out == reference_redact(secrets, text)
        assert out == words.join([REDACTED] * len(used))


def test_non_ascii_text_with_lone_surrogates_keeps_them_and_loses_the_secret() -> None:
    # Matches are overwritten in the text's UTF-8 with filler that decoding drops; a lone
    # surrogate (passed through the encoding) must come back as it was, beside every replacement.
    for around in ("\ud800", "é\udfff", "\udc80🔑"):
        text = f"{around}{TOKEN}{around}x{base64.b64encode(TOKEN.encode()).decode()}{around}"
        out = Redactor([CANARY]).redact(text)
        assert out == f"{around}{REDACTED}{around}x{REDACTED}{around}"


def test_a_match_shorter_than_the_replacement_in_non_ascii_text_is_replaced_whole() -> None:
    # A literal piece of 8 bytes leaves no room to overwrite it with REDACTED in place.
    text = "é 12345678 ü 12345678" + "x" * 5000 + "中 abcdefghij"
    out = Redactor(literal=["12345678", "abcdefghij"]).redact(text)
    assert out == f"é {REDACTED} ü {REDACTED}" + "x" * 5000 + f"中 {REDACTED}"


@pytest.mark.parametrize("non_ascii", [False, True])
def test_a_span_full_of_different_hits_is_redacted_like_a_naive_search(non_ascii: bool) -> None:
    # Every sampled block of a span is a hit, and many share their first byte: each is found.
    forms = sorted(encoded_forms(CANARY), key=len)
    text = ("é" if non_ascii else " ").join(forms[:60] * 3)
    assert Redactor([CANARY]).redact(text) == reference_redact([CANARY], text)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_base64_wrapped_across_a_line_break_is_redacted_at_every_cut_and_alignment(newline: str) -> None:
    redactor = Redactor([CANARY])
    stride = redactor._built().stride
    assert stride > 0
    data = b"\x00\x01\x02" + CANARY.encode() + b"\xfe\xfd"
    for pad in range(3):
        blob = base64.b64encode(bytes(pad) + data).decode()
        for cut in range(1, len(blob)):
            wrapped = blob[:cut] + newline + blob[cut:]
            for lead in range(stride + 1):
                text = "z" * lead + wrapped + " tail"
                out = redactor.redact(text)
                assert leaked(CANARY, out.replace(newline, "")) == [], (pad, cut, lead)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("width", [64, 76])
def test_a_secret_at_every_offset_of_a_wrapped_blob_is_redacted(newline: str, width: int) -> None:
    # A blob wrapped as PEM (64 columns) or MIME (76), with the secret at every byte offset in
    # it: every cut of its base64 by a break, at every alignment and every place in the line.
    redactor = Redactor([CANARY])
    secret = CANARY.encode()
    for before in range(width):
        blob = base64.b64encode(bytes(range(before)) + secret + b"\xfe\xfd\xfc").decode()
        lines = [blob[at : at + width] for at in range(0, len(blob), width)]
        text = "x = " + newline.join(lines) + newline + "end"
        out = redactor.redact(text)
        assert leaked(CANARY, out.replace(newline, "")) == [], before
        if out != reference_redact([CANARY], text):
            # Cut by a break, the blob's run goes whole, but for a first or last line that holds
            # no part of the secret.
            assert out.count(REDACTED) == 1, before
            head, tail = out.split(REDACTED)
            assert head in ("x = ", "x = " + lines[0] + newline), before
            assert tail in (newline + "end", newline + lines[-1] + newline + "end"), before


@pytest.mark.parametrize("search", ["filter"], indirect=True)  # counts the filter's own steps
@pytest.mark.parametrize("newline", ["", "\n", "\r\n"])
def test_ten_megabytes_of_base64_cost_a_decoding_only_at_rare_chance_hits(
    decodings: list[int], newline: str
) -> None:
    # An attachment: one run of base64 without a break, or wrapped at 76 columns.
    blob = base64.b64encode(random.Random(7).randbytes(7_500_000)).decode()
    text = newline.join(blob[at : at + 76] for at in range(0, len(blob), 76)) if newline else blob
    redactor = Redactor([CANARY, API_KEY])
    assert redactor.redact(text) is text
    assert decodings[0] <= len(text) // redactor._built().stride // 1000


@pytest.mark.parametrize("search", ["filter"], indirect=True)  # counts the filter's own steps
def test_a_hostile_base64_run_costs_at_most_a_decoding_per_sampled_block(decodings: list[int]) -> None:
    # The secret's own base64 cut short, repeated: every sampled block is one of its blocks and
    # a hit that fails to confirm. Each decoding looks at a few times the encoding's length of
    # bytes, so the work is linear in the text, never quadratic, with or without breaks.
    redactor = Redactor([CANARY])
    core = base64.b64encode(CANARY.encode()).decode()[:-6]
    for unit in (core, core + "\n"):
        decodings[0] = 0
        text = unit * (1_000_000 // len(unit))
        assert redactor.redact(text) is text
        assert decodings[0] <= 2 * len(text) // redactor._built().stride


@pytest.mark.parametrize("fill", [".", "é"])  # not base64: the run is the core's alone
def test_a_wrapped_core_across_the_edge_of_two_scanned_chunks_is_redacted(fill: str) -> None:
    # Non-ASCII text is scanned a chunk at a time (and so is any text for `contains`).
    redactor = Redactor([CANARY])
    # The credential's: a break in the base64 of "Bearer " leaves that part (no secret) as it is.
    core = base64.b64encode(TOKEN.encode()).decode()
    edge = _blocks._CHUNK
    for cut in (1, len(core) // 2, len(core) - 1):
        for newline in ("\n", "\r\n"):
            wrapped = core[:cut] + newline + core[cut:]
            for shift in range(-len(wrapped), 1):
                text = fill * (edge + shift) + wrapped + " tail"
                out = redactor.redact(text)
                # A last line of padding alone, which holds no bit of the secret, may stay.
                assert out.startswith(fill * (edge + shift) + REDACTED), (cut, newline, shift)
                assert out.endswith(" tail") and leaked(CANARY, out.replace(newline, "")) == []
                assert redactor.contains(text)


@pytest.mark.parametrize("search", ["default"], indirect=True)
def test_short_texts_build_no_filter_until_a_long_text_or_the_budget_needs_it() -> None:
    # A chat that is only ever shown tool definitions and short replies never pays for the filter.
    redactor = Redactor([CANARY])
    wrapped = base64.b64encode(CANARY.encode()).decode()
    wrapped = wrapped[:20] + "\r\n" + wrapped[20:]  # the break within the credential's part
    assert redactor.redact(f"tool: {TOKEN} and {wrapped}") == f"tool: {REDACTED} and {REDACTED}"
    assert redactor.contains(f"x\n{TOKEN}") and not redactor.contains("nothing here\n")
    assert redactor._tables is None
    long = filler(_redact._DIRECT + 1) + TOKEN
    assert redactor.redact(long) == long[: -len(TOKEN)] + REDACTED
    assert redactor._tables is not None
    # A stream of short texts asks for it once what they cost adds up to what building costs,
    # goes on searching directly while no caller builds it, and builds it past twice that.
    redactor = Redactor([CANARY])
    short = filler(_redact._DIRECT - 100)
    while not redactor.filter_wanted:
        assert redactor.redact(short) is short
    assert redactor._tables is None
    assert redactor.redact(short[:200] + TOKEN) == short[:200] + REDACTED
    for _ in range(_redact._DIRECT_BUDGET // len(short) + 2):
        assert redactor.redact(short) is short
    assert redactor._tables is not None and not redactor.filter_wanted
    assert redactor.redact(short + TOKEN) == short + REDACTED


@pytest.mark.parametrize("search", ["default"], indirect=True)
def test_the_filter_built_a_step_at_a_time_is_used_only_once_complete() -> None:
    secrets = [CANARY, API_KEY, AWKWARD]
    whole = Redactor(secrets)._built()
    redactor = Redactor(secrets)
    text = f"x {TOKEN} y " + base64.b64encode(AWKWARD.encode()).decode() + "\n" + filler(50)
    steps = redactor.filter_steps()
    taken = 0
    for _ in steps:
        taken += 1
        # Half built, nothing uses it: short texts are searched directly.
        assert redactor._tables is None
        assert redactor.redact(text) == reference_redact(secrets, text)
    assert taken > 3  # the build pauses between forms and cores
    built = redactor._tables
    assert built is not None and built.short == whole.short

    def owners(tables: _blocks._Tables) -> dict[int, list[tuple[bytes, int, bool]]]:
        return {
            block: [(form, offset, core is not None) for form, offset, core in pairs]
            for block, pairs in tables.owners.items()
        }

    assert owners(built) == owners(whole)
    assert list(redactor.filter_steps()) == []  # built once
    long = filler(_redact._DIRECT + 1) + text
    assert redactor.redact(long) == reference_redact(secrets, long)


@pytest.mark.parametrize("search", ["default"], indirect=True)
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_texts_either_side_of_the_direct_search_limit_lose_every_form(newline: str) -> None:
    forms = sorted(encoded_forms(CANARY))
    for length in (_redact._DIRECT - 1, _redact._DIRECT, _redact._DIRECT + 1):
        for form in forms[:: max(1, len(forms) // 40)]:
            text = filler(length)
            text = text[: length - len(form) - 3] + newline + form + " ."
            text = text[-length:] if len(text) > length else text
            out = Redactor([CANARY]).redact(text)
            assert out == reference_redact([CANARY], text), (length, form)
            assert leaked(CANARY, out) == []
