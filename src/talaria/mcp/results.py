"""An MCP tool result as the text the model reads.

Text parts are kept as written; structured content is given as JSON when there is no text;
images and audio are saved under the home (`mcp/media/`) and named by path and type (an image by
the type its bytes say: bytes that are no PNG, JPEG, GIF or WebP are saved as a plain file and
never become an image part); embedded
resources are inlined (text) or saved (binary); resource links are listed.
`isError` makes the whole result an error result.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from talaria.messages.media import IMAGE_EXTENSIONS, image_type, media_name, saved_marker

_EXTENSIONS = {**IMAGE_EXTENSIONS, "audio/wav": ".wav", "audio/mpeg": ".mp3"}


@dataclass(frozen=True)
class Rendered:
    text: str
    is_error: bool


def render_result(result: Any, media_dir: Path) -> Rendered:
    parts = [_render_part(part, media_dir) for part in result.content or []]
    text = "\n".join(part for part in parts if part)
    structured = getattr(result, "structured_content", None)
    if structured is not None and not text:
        # The spec asks servers to send structured content's text form too; use it when
        # they do, so the model does not read the same result twice.
        text = json.dumps(structured, ensure_ascii=False, separators=(",", ":"))
    return Rendered(text, bool(result.is_error))


def _render_part(part: Any, media_dir: Path) -> str:
    render = _RENDERERS.get(getattr(part, "type", ""))
    return render(part, media_dir) if render else f"[unsupported content: {part.type}]"


def _text(part: Any, media_dir: Path) -> str:
    return str(part.text)


def _media(part: Any, media_dir: Path) -> str:
    mime = str(part.mime_type or "application/octet-stream")
    return _save(part.data, mime, media_dir, part.type)


def render_contents(contents: list[Any], media_dir: Path) -> str:
    """What `resources/read` returned: text inline, binary saved to a file."""
    return "\n".join(_contents(item, media_dir) for item in contents) or "(empty resource)"


def _resource(part: Any, media_dir: Path) -> str:
    return _contents(part.resource, media_dir)


def _contents(resource: Any, media_dir: Path) -> str:
    uri = str(resource.uri)
    text = getattr(resource, "text", None)
    if text is not None:
        return f"[resource {uri}]\n{text}"
    mime = str(getattr(resource, "mime_type", None) or "application/octet-stream")
    return f"[resource {uri} ({mime})]\n{_save(resource.blob, mime, media_dir)}"


def _link(part: Any, media_dir: Path) -> str:
    description = f" - {part.description}" if getattr(part, "description", None) else ""
    return f"[resource link {part.uri} ({part.name}){description}]"


def _save(data: str, mime: str, media_dir: Path, kind: str | None = None) -> str:
    """Write base64 `data` to a file named by its hash; the marker says where (or why not).
    An image's marker is what shows it to a model that takes images (messages/media.py)."""
    kind = kind or ("image" if mime.startswith("image/") else "file")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return f"[{kind} {mime}: not shown (the server sent invalid base64)]"
    note = ""
    if kind == "image":
        found = image_type(raw)
        if found is None:
            note = f" (labelled {mime}, but its bytes are no PNG, JPEG, GIF or WebP image)"
            kind, mime = "file", "application/octet-stream"
        else:
            mime = found
    path = media_dir / media_name(raw, _EXTENSIONS.get(mime, ".bin"))
    try:
        media_dir.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)
    except OSError as exc:
        return f"[{kind} {mime}: {len(raw)} bytes, not saved ({exc})]"
    return saved_marker(kind, mime, len(raw), path) + note


_RENDERERS: dict[str, Callable[[Any, Path], str]] = {
    "text": _text,
    "image": _media,
    "audio": _media,
    "resource": _resource,
    "resource_link": _link,
}
