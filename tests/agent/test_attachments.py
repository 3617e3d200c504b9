"""What the agent is given of a person's files: a note each, and an image as an image only where the
model takes images (and it is not too large to send)."""

from __future__ import annotations

from pydantic_ai.messages import BinaryContent, ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.profiles import ModelProfile

from playa.agent._attachments import MAX_IMAGE, turn_prompt
from playa.core import Attachment

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def model(*, images: bool) -> FunctionModel:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("ok")])

    return FunctionModel(answer, profile=ModelProfile(supports_image_input=images))


def test_a_message_without_files_is_its_text() -> None:
    assert turn_prompt("hello", (), model(images=True)) == ("hello", "hello")


def test_an_image_goes_as_an_image_with_a_note_where_the_model_takes_images() -> None:
    photo = Attachment("received/photo-7.png", "image/png", len(PNG), PNG)
    text, prompt = turn_prompt("look", (photo,), model(images=True))
    assert text.startswith("look\n\n[The person sent an image (image/png")
    assert "received/photo-7.png; it is attached here too." in text
    assert prompt == [text, BinaryContent(data=PNG, media_type="image/png")]


def test_a_model_without_images_and_a_too_large_image_get_the_note_alone() -> None:
    photo = Attachment("received/photo-7.png", "image/png", len(PNG), PNG)
    text, prompt = turn_prompt("", (photo,), model(images=False))
    assert prompt == text
    assert text.startswith("[The person sent an image") and "attached here" not in text

    huge = Attachment("received/huge.png", "image/png", MAX_IMAGE + 1, b"x" * (MAX_IMAGE + 1))
    text, prompt = turn_prompt("", (huge,), model(images=True))
    assert prompt == text and "received/huge.png." in text


def test_a_document_is_a_note_never_its_bytes() -> None:
    document = Attachment("received/notes.txt", "text/plain", 12)
    text, prompt = turn_prompt("read it", (document,), model(images=True))
    assert (
        prompt
        == text
        == "read it\n\n[The person sent a file (text/plain, 12 bytes); it is in your workspace at received/notes.txt.]"
    )
