"""The contract of the engine in one small package: messages, model requests and responses,
the turn result, and the interfaces the loop depends on.

Nothing here imports anything else of talaria (tests/architecture/test_layers.py checks it),
so every other package can depend on it without forming a cycle. The names load on first use
(as `import talaria` does): a module that needs only the message types does not pay for the
model dataclasses.
"""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from talaria.core.messages import (
        AssistantMessage,
        Content,
        ContentPart,
        FileData,
        FilePart,
        FunctionCall,
        ImagePart,
        ImageURL,
        Message,
        Role,
        SystemMessage,
        TextPart,
        ToolCallDict,
        ToolMessage,
        UserMessage,
        tool_calls_of,
    )
    from talaria.core.model import ModelRequest, ModelResponse, ToolCall, Usage
    from talaria.core.protocols import (
        ApprovalAsk,
        ApprovalDecision,
        ApprovalVerdict,
        Approver,
        ModelClient,
        SessionLog,
        StreamHandler,
        ToolApprover,
    )
    from talaria.core.result import (
        ExitReason,
        TurnResult,
        UsageDict,
        exit_reason,
        failed,
        failure_class,
        halt_reason,
        halted,
    )

_EXPORTS = {
    "ApprovalAsk": "talaria.core.protocols",
    "ApprovalDecision": "talaria.core.protocols",
    "Approver": "talaria.core.protocols",
    "ApprovalVerdict": "talaria.core.protocols",
    "AssistantMessage": "talaria.core.messages",
    "Content": "talaria.core.messages",
    "ContentPart": "talaria.core.messages",
    "ExitReason": "talaria.core.result",
    "FileData": "talaria.core.messages",
    "FilePart": "talaria.core.messages",
    "FunctionCall": "talaria.core.messages",
    "ImagePart": "talaria.core.messages",
    "ImageURL": "talaria.core.messages",
    "Message": "talaria.core.messages",
    "ModelClient": "talaria.core.protocols",
    "ModelRequest": "talaria.core.model",
    "ModelResponse": "talaria.core.model",
    "Role": "talaria.core.messages",
    "SessionLog": "talaria.core.protocols",
    "StreamHandler": "talaria.core.protocols",
    "SystemMessage": "talaria.core.messages",
    "TextPart": "talaria.core.messages",
    "ToolApprover": "talaria.core.protocols",
    "ToolCall": "talaria.core.model",
    "ToolCallDict": "talaria.core.messages",
    "ToolMessage": "talaria.core.messages",
    "TurnResult": "talaria.core.result",
    "Usage": "talaria.core.model",
    "UsageDict": "talaria.core.result",
    "UserMessage": "talaria.core.messages",
    "exit_reason": "talaria.core.result",
    "failed": "talaria.core.result",
    "failure_class": "talaria.core.result",
    "halt_reason": "talaria.core.result",
    "halted": "talaria.core.result",
    "tool_calls_of": "talaria.core.messages",
}

__all__ = [
    "ApprovalAsk",
    "ApprovalDecision",
    "ApprovalVerdict",
    "Approver",
    "AssistantMessage",
    "Content",
    "ContentPart",
    "ExitReason",
    "FileData",
    "FilePart",
    "FunctionCall",
    "ImagePart",
    "ImageURL",
    "Message",
    "ModelClient",
    "ModelRequest",
    "ModelResponse",
    "Role",
    "SessionLog",
    "StreamHandler",
    "SystemMessage",
    "TextPart",
    "ToolApprover",
    "ToolCall",
    "ToolCallDict",
    "ToolMessage",
    "TurnResult",
    "Usage",
    "UsageDict",
    "UserMessage",
    "exit_reason",
    "failed",
    "failure_class",
    "halt_reason",
    "halted",
    "tool_calls_of",
]


def __getattr__(name: str) -> Any:
    try:
        module_name = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'talaria.core' has no attribute {name!r}") from None
    import importlib

    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value
