"""What a person is shown of a link a server asks them to open: the whole link, the domain, the warnings."""

from __future__ import annotations

from playa.core import Question, check_link, render_question


def test_a_punycode_label_that_mixes_latin_and_cyrillic_is_decoded_and_warned_about() -> None:
    check = check_link("http://xn--pypal-4ve.example/login?next=/home")
    assert check.url == "http://xn--pypal-4ve.example/login?next=/home"
    assert check.domain == "p\u0430ypal.example"  # a Cyrillic а
    assert check.ascii_domain == "xn--pypal-4ve.example"
    assert check.domain_line == "Domain: p\u0430ypal.example (written xn--pypal-4ve.example)"
    assert check.warnings == ("'p\u0430ypal' mixes scripts (Cyrillic, Latin): it may imitate another name.",)


def test_a_mixed_script_label_written_in_unicode_gets_its_punycode_form_and_the_warning() -> None:
    check = check_link("https://\u0440aypal.example/")  # a Cyrillic р
    assert check.ascii_domain is not None and check.ascii_domain.startswith("xn--")
    assert len(check.warnings) == 1 and "mixes scripts (Cyrillic, Latin)" in check.warnings[0]


def test_an_international_name_in_one_script_shows_both_forms_and_no_warning() -> None:
    for url in ("https://m\u00fcnchen.example/a", "https://xn--mnchen-3ya.example/a"):
        check = check_link(url)
        assert check.domain == "m\u00fcnchen.example"
        assert check.ascii_domain == "xn--mnchen-3ya.example"
        assert check.warnings == ()
        assert check.url == url
    greek = check_link("https://\u03b5\u03bb\u03bb\u03ac\u03b4\u03b1.example/")
    assert greek.warnings == () and greek.ascii_domain is not None


def test_latin_with_han_and_kana_is_an_allowed_mix() -> None:
    assert check_link("https://\u6771\u4eactokyo.jp/").warnings == ()
    assert check_link("https://\u30c6\u30b9\u30c8\u4e2d.jp/").warnings == ()


def test_a_plain_domain_has_no_second_form_and_no_warning() -> None:
    check = check_link("https://Login.Example.org:8443/consent?state=abc")
    assert (check.domain, check.ascii_domain, check.warnings, check.web) == (
        "login.example.org",
        None,
        (),
        True,
    )
    assert check.lines() == [
        "Link: https://Login.Example.org:8443/consent?state=abc",
        "Domain: login.example.org",
    ]


def test_punycode_that_does_not_decode_is_warned_about() -> None:
    check = check_link("https://xn--zzzz-.example/")
    assert check.domain == "xn--zzzz-.example"
    assert check.warnings == ("'xn--zzzz-' is punycode that does not decode to a name: it imitates one.",)


def test_a_user_name_before_the_domain_is_warned_about_and_the_real_domain_shown() -> None:
    check = check_link("https://paypal.com@evil.example/")
    assert check.domain == "evil.example"
    assert check.warnings == (
        "the link has a user name before its domain (paypal.com@): the site it opens is the domain below.",
    )


def test_a_web_link_is_read_as_a_browser_reads_it_backslashes_and_slashes_and_all() -> None:
    check = check_link("https://evil.example\\@bank.example/login")
    assert check.domain == "evil.example" and check.web
    assert check.warnings == (
        "the link is not written as web links are ('\\' for '/', or not two slashes after 'https:'): "
        "a browser reads it as https://evil.example/@bank.example/login, its domain the one below.",
    )
    for url in (
        "https:\\\\evil.example/",
        "https:evil.example/",
        "https:/evil.example",
        "https:///evil.example",
    ):
        check = check_link(url)
        assert (check.domain, check.web) == ("evil.example", True), url
    assert check_link("https:bank.example@evil.example").domain == "evil.example"
    assert check_link("https://bank.example/a\\b").warnings  # a backslash anywhere is read so too
    assert check_link("https://bank.example/a/b").warnings == ()


def test_invisible_characters_are_shown_encoded_and_warned_about() -> None:
    check = check_link("https://exa\u202emple.org/\u200bpath")
    assert check.url == "https://exa%E2%80%AEmple.org/%E2%80%8Bpath"
    assert "\u202e" not in "".join(check.lines()) and "\u200b" not in "".join(check.lines())
    assert "the link holds invisible or control characters; each is shown %-encoded." in check.warnings


def test_a_link_that_is_no_web_page_has_no_domain_and_a_warning() -> None:
    check = check_link("javascript:alert(1)")
    assert (check.domain_line, check.web) == ("Domain: none", False)
    assert check.warnings == ("this is a javascript: link, not a web page.",)


def test_the_question_shows_the_whole_link_then_the_domain_line_then_the_warning() -> None:
    question = Question(asker="bank", text="Sign in", url="http://xn--pypal-4ve.example/a?b=c")
    assert render_question(question).splitlines() == [
        "bank asks: Sign in",
        "It asks you to open this link (nothing was fetched from it):",
        "Link: http://xn--pypal-4ve.example/a?b=c",
        "Domain: p\u0430ypal.example (written xn--pypal-4ve.example)",
        "Warning: 'p\u0430ypal' mixes scripts (Cyrillic, Latin): it may imitate another name.",
        "Answer /accept if you will open it, /decline, or /cancel.",
    ]


def test_a_percent_encoded_or_ideographically_dotted_domain_is_judged_as_a_browser_reads_it() -> None:
    encoded = check_link("http://p%D0%B0ypal.example/")
    assert encoded.domain == "p\u0430ypal.example"
    assert encoded.warnings[0] == "the domain is %-encoded; decoded, it is the one below."
    assert "mixes scripts (Cyrillic, Latin)" in encoded.warnings[1]
    dotted = check_link("https://login\u3002evil.example/")
    assert (dotted.domain, dotted.ascii_domain) == ("login.evil.example", None)
