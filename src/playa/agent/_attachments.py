"""The person's turn with the files they sent: a note for each, and an image shown where the model takes images."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from pydantic_ai.messages import BinaryContent, UserContent
from pydantic_ai.models import Model

from ..core import Attachment, attachment_note

__all__ = ["MAX_IMAGE", "Prompt", "turn_prompt"]

Prompt = str | list[UserContent]
"""What the agent is given of the person's turn: its text, or its text and images."""

MAX_IMAGE: Final = 5 * 1024 * 1024
"""Bytes of one image the model is shown (the smallest limit of the main providers); a larger
one stays in the workspace, and the agent is told where."""


def turn_prompt(text: str, attachments: Sequence[Attachment], model: Model) -> tuple[str, Prompt]:
    """The turn's text with a note per file, and what the agent is given: that text, or that text
    and the images when the model takes images.

    The text is what the history's window is sized for; the images pass the model-bound gate
    like every other part (one that holds a credential is withheld there).
    """
    if not attachments:
        return text, text
    takes_images = bool(model.profile.get("supports_image_input", False))
    images: list[UserContent] = []
    notes: list[str] = []
    for attachment in attachments:
        image = attachment.image if takes_images else None
        shown = image is not None and len(image) <= MAX_IMAGE
        if image is not None and shown:
            images.append(BinaryContent(data=image, media_type=attachment.media_type))
        notes.append(attachment_note(attachment, shown=shown))
    full = "\n\n".join(part for part in (text.strip(), *notes) if part)
    return full, [full, *images] if images else full
