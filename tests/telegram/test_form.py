"""A server's form as a Telegram message: what each press does, before any message is sent."""

from __future__ import annotations

from playa.core import Answer, Field, Question, check_link
from playa.mcp_remote import MAX_LINK_SHOWN, MAX_TEXT
from playa.telegram import MESSAGE_LIMIT, utf16_len
from playa.telegram._form import MAX_OPTION_BUTTONS, Form, Prompt, url_text

MANY = tuple(f"option-{n}" for n in range(MAX_OPTION_BUTTONS + 1))


def keys(form: Form) -> dict[str, str]:
    return {label: key for row in form.rows() for label, key in row}


def test_a_choice_with_many_options_is_typed_and_checked_against_them() -> None:
    form = Form(Question("srv", "Pick", (Field("pick", "choice", options=MANY, required=True),)))
    prompt = form.press(keys(form)["✎ pick: required, not given"])
    assert isinstance(prompt, Prompt)
    assert "one of: option-0, option-1" in prompt.text
    again = form.reply(prompt, "option-99")
    assert isinstance(again, Prompt)
    assert again.problem.startswith("pick is one of")
    assert form.reply(prompt, "option-3") is None
    assert form.press("accept") == Answer("accept", {"pick": "option-3"})


def test_several_choices_are_ticked_and_unticked_and_kept_in_the_servers_order() -> None:
    item = Field("tags", "choices", options=("a", "b", "c"), default=["c"])
    form = Form(Question("srv", "Tags", (item,)))
    assert form.press(keys(form)["▾ tags: c (default)"]) is None
    options = keys(form)
    assert list(options) == ["a", "b", "☑ c", "Done"]
    for label in ("a", "☑ c"):
        form.press(options[label])
    form.press(options["b"])
    assert form.values == {"tags": ["a", "b"]}
    form.press(keys(form)["Done"])
    assert form.press("accept") == Answer("accept", {"tags": ["a", "b"]})


def test_accept_opens_the_options_of_a_required_choice_still_empty() -> None:
    form = Form(Question("srv", "Pick", (Field("colour", "choice", options=("red", "blue"), required=True),)))
    assert form.press("accept") is None
    assert "colour is required: pick one" in form.text()
    assert list(keys(form)) == ["red", "blue", "‹ Back"]


def test_presses_that_no_button_made_change_nothing() -> None:
    form = Form(Question("srv", "Pick", (Field("ok", "boolean"),)))
    for key in ("f7", "o0:9", "o9:0", "fx", "nonsense"):
        assert form.press(key) is None
    assert form.values == {}
    assert form.press("accept") == Answer("accept", {})


def test_the_longest_link_question_fits_one_message_with_the_link_whole_and_the_text_cut() -> None:
    base = "https://xn--pypal-4ve.example/?"
    url = base + "a" * (MAX_LINK_SHOWN - len("\n".join(check_link(base).lines())))
    text = url_text(Question("srv", "\U0001f600" * MAX_TEXT, url=url))
    assert utf16_len(text) <= MESSAGE_LIMIT
    assert text.startswith("srv asks: \U0001f600") and "\U0001f600…\n\n" in text
    assert "\n".join(check_link(url).lines()) in text
    assert text.endswith("Press Accept if you will open it, Decline, or Cancel.")
