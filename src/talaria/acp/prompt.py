"""A `session/prompt` as the content of a talaria user message.

Text stays text; a resource link becomes a mention of its path (the agent can read it); an
embedded resource (an editor's @-mention with the buffer's text) is a mention in place plus the
text in a context block after the message; images become image parts when the model takes them.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote, urlparse

from acp.schema import (
    AudioContentBlock,
    BlobResourceContents,
    EmbeddedResourceContentBlock,
    ImageContentBlock,
    ResourceContentBlock,
    TextContentBlock,
)

from talaria.acp.errors import invalid
from talaria.core import Content, ContentPart, ImagePart


def prompt_content(blocks: list[Any], *, images: bool) -> Content:
    """What the agent gets as the user's message; RequestError for content this agent did not
    advertise."""
    inline: list[tuple[str, bool]] = []
    """(text, is a mention): mentions are kept apart from their neighbours by a space."""
    context: list[str] = []
    pictures: list[ContentPart] = []
    for block in blocks:
        if isinstance(block, TextContentBlock):
            inline.append((block.text, False))
        elif isinstance(block, ResourceContentBlock):
            inline.append((_mention(block.uri, block.name), True))
        elif isinstance(block, EmbeddedResourceContentBlock):
            inline.append((_mention(block.resource.uri, None), True))
            context.append(_context_block(block))
        elif isinstance(block, ImageContentBlock):
            pictures.append(_image_part(block, images))
        elif isinstance(block, AudioContentBlock):
            raise invalid("talaria does not take audio prompts")
    text = _join(inline).strip()
    if context:
        text = "\n\n".join([text, *context]) if text else "\n\n".join(context)
    if not text and not pictures:
        raise invalid("the prompt is empty")
    if not pictures:
        return text
    return [{"type": "text", "text": text}, *pictures] if text else pictures


def uri_path(uri: str) -> str:
    """A file URI as a local path; any other URI as it is."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def _mention(uri: str, name: str | None) -> str:
    return f"@{uri_path(uri) or name}"


def _join(pieces: list[tuple[str, bool]]) -> str:
    text, after_mention = "", False
    for piece, mention in pieces:
        apart = piece and text and not text[-1].isspace() and not piece[0].isspace()
        if apart and (mention or after_mention):
            text += " "
        text += piece
        after_mention = mention
    return text


def _context_block(block: EmbeddedResourceContentBlock) -> str:
    resource = block.resource
    path = uri_path(resource.uri)
    if isinstance(resource, BlobResourceContents):
        size = len(resource.blob) * 3 // 4
        kind = resource.mime_type or "binary data"
        return f'<context path="{path}">\n[{kind}, about {size} bytes, not shown]\n</context>'
    return f'<context path="{path}">\n{resource.text}\n</context>'


def _image_part(block: ImageContentBlock, images: bool) -> ImagePart:
    if not images:
        raise invalid("this model does not take images (model.vision is false)")
    url = f"data:{block.mime_type};base64,{block.data}"
    return {"type": "image_url", "image_url": {"url": url}}
