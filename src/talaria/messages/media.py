"""Images that tools saved under the home, shown to the model as image parts.

A tool result is text, so an MCP server's image is saved to `$TALARIA_HOME/mcp/media/` and the
result names it with a marker (`[image image/png: 95 bytes saved to /.../ab12.png]`). The stored
history keeps that text; each request for a model that takes images gets, after the tool
results, one user message with the images as the canonical image parts (as a user's own
images travel), so all three wire formats carry them. Only files in the media folder whose
name is the hash of their bytes are read: a marker that some other output imitates sends
nothing, and neither does one whose bytes are not the image its name says (checked by their
magic numbers, so a server that labels anything `image/png` cannot make it an image part).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from pathlib import Path

from talaria.core import ImagePart, Message, TextPart, UserMessage

MEDIA_FOLDER = ("mcp", "media")
IMAGE_EXTENSIONS = {
    "image/png": ".png",
    "image/jpeg": ".jpg",
    "image/gif": ".gif",
    "image/webp": ".webp",
}
_MAGIC: tuple[tuple[str, bytes, int], ...] = (
    ("image/png", b"\x89PNG\r\n\x1a\n", 0),
    ("image/jpeg", b"\xff\xd8\xff", 0),
    ("image/gif", b"GIF87a", 0),
    ("image/gif", b"GIF89a", 0),
    ("image/webp", b"WEBP", 8),  # after "RIFF" and the size
)
MAX_IMAGE_BYTES = 5 * 1024 * 1024
"""The largest image the hosted APIs take; a larger one stays a path."""
NAME_HASH_LENGTH = 16

_MARKER = re.compile(r"\[image (image/[a-z0-9.+-]+): \d+ bytes saved to ([^\]\n]+)\]")


@functools.lru_cache(maxsize=64)
def media_dir(home: Path) -> Path:
    """Where `home`'s media are saved (asked at every model call)."""
    return home.joinpath(*MEDIA_FOLDER)


def image_type(raw: bytes) -> str | None:
    """The image type the bytes themselves say (PNG, JPEG, GIF, WebP), or None."""
    for mime, magic, offset in _MAGIC:
        if raw[offset : offset + len(magic)] == magic and (offset == 0 or raw[:4] == b"RIFF"):
            return mime
    return None


def media_name(raw: bytes, extension: str) -> str:
    """The file name a saved medium gets: the start of its SHA-256, then its extension."""
    return hashlib.sha256(raw).hexdigest()[:NAME_HASH_LENGTH] + extension


def saved_marker(kind: str, mime: str, size: int, path: Path) -> str:
    return f"[{kind} {mime}: {size} bytes saved to {path}]"


def save_image(raw: bytes, mime: str, home: Path) -> str:
    """Save image bytes (of type `mime`, checked by the caller) in `home`'s media folder and
    return the marker that shows them to a model that takes images."""
    folder = media_dir(home)
    path = folder / media_name(raw, IMAGE_EXTENSIONS[mime])
    folder.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw)
    return saved_marker("image", mime, len(raw), path)


def with_tool_images(messages: list[Message], folder: Path) -> list[Message]:
    """`messages` with a user message of image parts after each run of tool results that
    name saved images; the same list when none do (found without building a new one: this
    runs before every model call, over the whole history)."""
    if not any(_may_name_images(message) for message in messages):
        return messages
    out: list[Message] = []
    pending: list[ImagePart] = []
    for message in messages:
        if message.get("role") != "tool" and pending:
            out.append(_image_message(pending))
            pending = []
        out.append(message)
        if message.get("role") == "tool":
            pending.extend(_images_in(message, folder))
    if pending:
        out.append(_image_message(pending))
    return out if len(out) != len(messages) else messages


def _may_name_images(message: Message) -> bool:
    content = message.get("content")
    return message.get("role") == "tool" and isinstance(content, str) and "[image " in content


def _image_message(parts: list[ImagePart]) -> UserMessage:
    intro: TextPart = {"type": "text", "text": "The images from the tool results above:"}
    return {"role": "user", "content": [intro, *parts]}


def _images_in(message: Message, folder: Path) -> list[ImagePart]:
    content = message.get("content")
    if not isinstance(content, str) or "[image " not in content:
        return []
    parts: list[ImagePart] = []
    for mime, written in _MARKER.findall(content):
        url = _data_url(Path(written.strip()), mime, folder)
        if url is not None:
            parts.append({"type": "image_url", "image_url": {"url": url}})
    return parts


def _data_url(path: Path, mime: str, folder: Path) -> str | None:
    """The image as a data URL when it is a saved image of this home, else None."""
    extension = IMAGE_EXTENSIONS.get(mime)
    if extension is None or path.suffix != extension:
        return None
    try:
        if path.parent.resolve() != folder.resolve() or path.is_symlink():
            return None
        stat = path.stat()
    except OSError:
        return None
    if stat.st_size > MAX_IMAGE_BYTES:
        return None
    return _encoded(str(path), mime, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _encoded(path: str, mime: str, mtime_ns: int, size: int) -> str | None:
    """Read, check and encode once per file version: every request of the session sends the
    image again (a few recent ones are kept; the file's time and size key the entry)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    if Path(path).name != media_name(data, IMAGE_EXTENSIONS[mime]) or image_type(data) != mime:
        return None
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
