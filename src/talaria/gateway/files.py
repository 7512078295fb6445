"""Files through the gateway: what a user sends is saved in the chat's folder of the agent's
working directory (images also reach a model that sees, as image parts), and a line
`MEDIA:<path>` in an answer sends a file of that folder back.

A sender's file name is never trusted: only its last component is kept, reduced to plain
characters, and a file is never overwritten (a clash gets a numbered suffix; the file is
created exclusively, so not through a symlink either). An image is known by its bytes, not
by the MIME type the platform claims (`talaria.messages.media.image_type`). An answer can
only send files inside the chat's folder, checked after symlinks are resolved.
"""

from __future__ import annotations

import base64
import itertools
import mimetypes
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from talaria.gateway.platform import Attachment, ChatRef
from talaria.messages.media import MAX_IMAGE_BYTES, image_type

MAX_FILE_BYTES = 20 * 1024 * 1024
"""The largest file taken in (the Bot API's own download limit)."""
FOLDER = "chat-files"
"""Under the agent's working directory: one folder per chat."""
MAX_NAME = 100
DOWNLOAD_TIMEOUT_S = 120.0
_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")
_MEDIA_LINE = re.compile(r"^[ \t]*MEDIA:[ \t]*(\S[^\n]*?)[ \t]*$", re.MULTILINE)


def chat_folder(cwd: Path, chat: ChatRef) -> Path:
    """The chat's own folder: `<cwd>/chat-files/<platform>-<chat>[-<thread>]`."""
    parts = [chat.platform, chat.chat_id, *([chat.thread_id] if chat.thread_id else [])]
    return cwd / FOLDER / "-".join(safe_name(part) for part in parts)


def safe_name(name: str) -> str:
    """`name`'s last path component in plain characters (never empty, `.` or `..`)."""
    last = name.replace("\\", "/").rsplit("/", 1)[-1]
    cleaned = _UNSAFE.sub("_", last).strip(" .")
    return cleaned[-MAX_NAME:] or "file"


def save(folder: Path, name: str, data: bytes) -> Path:
    """Write `data` as a new file in `folder`: `name`, or `name-1`, `name-2`... on a clash."""
    folder.mkdir(parents=True, exist_ok=True)
    safe = Path(safe_name(name))
    for n in itertools.count():
        candidate = folder / (safe.name if n == 0 else f"{safe.stem}-{n}{safe.suffix}")
        try:
            with candidate.open("xb") as handle:
                handle.write(data)
        except FileExistsError:
            continue
        return candidate
    raise AssertionError("unreachable")


def mime_type(name: str, data: bytes) -> str:
    """What a file sent back is: an image by its bytes, else by its name's extension."""
    return image_type(data) or mimetypes.guess_type(name)[0] or "application/octet-stream"


async def download(url: str, headers: dict[str, str] | None = None) -> bytes:
    """The bytes at an http(s) URL, never more than `MAX_FILE_BYTES` (redirects refused: a
    platform answers one for a missing permission). Needs aiohttp (the Slack and XMPP
    extras)."""
    import aiohttp

    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise ValueError(f"{url}: not an http(s) link")
    timeout = aiohttp.ClientTimeout(total=DOWNLOAD_TIMEOUT_S)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(url, headers=headers or {}, allow_redirects=False) as response,
    ):
        if response.status != 200:
            raise ConnectionError(f"the download answered HTTP {response.status}")
        data = bytearray()
        async for chunk in response.content.iter_chunked(1 << 16):
            data += chunk
            if len(data) > MAX_FILE_BYTES:
                raise ValueError(f"it is over the {MAX_FILE_BYTES >> 20} MB limit")
    return bytes(data)


def too_large(attachment: Attachment) -> bool:
    return (attachment.size or len(attachment.data or b"")) > MAX_FILE_BYTES


async def fetched(attachment: Attachment) -> bytes:
    """The attachment's bytes (downloaded now when the adapter left a `fetch`)."""
    if attachment.data is not None:
        return attachment.data
    if attachment.fetch is None:
        raise ValueError("the gateway restarted before saving it; please send it again")
    return await attachment.fetch()


@dataclass(frozen=True, slots=True)
class Received:
    path: Path
    image: str | None
    """A data URL when the bytes are an image a model can take."""


def received(path: Path, data: bytes) -> Received:
    mime = image_type(data)
    if mime is None or len(data) > MAX_IMAGE_BYTES:
        return Received(path, None)
    return Received(path, f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}")


def user_content(text: str, files: list[Received]) -> str | list[dict[str, Any]]:
    """The turn's user message: the text, a line naming each saved file, and image parts for
    the images (a plain string when there are none)."""
    if not files:
        return text
    lines = [text] if text else []
    lines += [f"[The user sent a file: saved as {f.path}]" for f in files]
    joined = "\n".join(lines)
    images = [f.image for f in files if f.image]
    if not images:
        return joined
    parts: list[dict[str, Any]] = [{"type": "text", "text": joined}]
    parts += [{"type": "image_url", "image_url": {"url": url}} for url in images]
    return parts


def how_to_send(platform: str, folder: Path) -> str:
    """The system prompt's line for a chat whose platform can carry files (`folder` as the
    agent sees it, relative to its working directory)."""
    return (
        f"This conversation is a {platform} chat. To send the user a file, put it in "
        f"{folder}/ (where the files they send are saved) and write a line MEDIA:<file name> "
        "in your answer."
    )


@dataclass(frozen=True, slots=True)
class Outgoing:
    text: str
    """The answer without its MEDIA lines."""
    files: list[Path]
    refused: list[str]
    """Why each MEDIA line that names no file of the chat's folder was not sent."""


def outgoing(answer: str, folder: Path) -> Outgoing:
    """Split an answer into its text and the files its MEDIA lines name; a relative path is
    taken in the chat's folder, and anything resolving outside it is refused."""
    files: list[Path] = []
    refused: list[str] = []
    root = folder.resolve()
    for written in _MEDIA_LINE.findall(answer):
        target = (folder / Path(written).expanduser()).resolve()
        if not target.is_relative_to(root):
            refused.append(f"{written} was not sent: only files in {folder} can be sent.")
        elif not target.is_file():
            refused.append(f"{written} was not sent: there is no such file.")
        else:
            files.append(target)
    text = _MEDIA_LINE.sub("", answer).strip() if files or refused else answer
    return Outgoing(text, files, refused)
