"""The canonical message: OpenAI chat format, as TypedDicts.

They are plain dicts at run time (no conversion, no cost), so every store, the wire adapters
and the hermes-shaped result keep working; the types only tell a reader and mypy which keys a
message of each role carries. Reasoning travels in ``assistant["reasoning"]`` and replay state
in ``assistant["reasoning_details"]``.
"""

from typing import Any, Literal, NotRequired, Required, TypeAlias, TypedDict, cast

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]


class ImageURL(TypedDict, total=False):
    url: Required[str]
    detail: str


class TextPart(TypedDict):
    """A text element of list content."""

    type: Literal["text"]
    text: str


class ImagePart(TypedDict):
    """An image element of list content (a URL or a ``data:`` URL)."""

    type: Literal["image_url"]
    image_url: ImageURL


class FileData(TypedDict, total=False):
    file_data: str
    """A ``data:`` URL."""
    file_id: str
    filename: str


class FilePart(TypedDict):
    """A file element of list content (a PDF, for the APIs that read them)."""

    type: Literal["file"]
    file: FileData


ContentPart: TypeAlias = TextPart | ImagePart | FilePart
Content: TypeAlias = str | list[ContentPart]


class FunctionCall(TypedDict):
    name: str
    arguments: str
    """The raw JSON text the model wrote."""


class ToolCallDict(TypedDict):
    """One tool call as it sits in an assistant message."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class SystemMessage(TypedDict):
    role: Literal["system"]
    content: Content


class UserMessage(TypedDict):
    role: Literal["user"]
    content: Content


class AssistantMessage(TypedDict, total=False):
    role: Required[Literal["assistant"]]
    content: Content | None
    tool_calls: list[ToolCallDict]
    reasoning: str
    reasoning_details: dict[str, Any]
    """Opaque replay state tagged with the endpoint that issued it (see `ModelResponse`)."""
    refusal: str


class ToolMessage(TypedDict):
    role: Literal["tool"]
    tool_call_id: str
    content: Content
    name: NotRequired[str]


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage
"""One message of a history; narrow it on ``message["role"]``."""


def tool_calls_of(message: Message) -> list[ToolCallDict]:
    """The tool calls a message requests: an assistant's, else none (a history loaded from a
    store may be malformed, so the role is read without assuming it is there)."""
    if message.get("role") != "assistant":
        return []
    return cast(AssistantMessage, message).get("tool_calls") or []
