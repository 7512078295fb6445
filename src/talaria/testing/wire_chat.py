"""The OpenAI Chat Completions wire format, as strict as the real API.

`validate` rejects what OpenAI rejects (and the alternation that stricter OpenAI-compatible
providers reject), so a history bug fails in tests instead of in production. `render` and
`render_stream` produce real ``chat.completion`` / ``chat.completion.chunk`` shapes.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from talaria.testing.script import Reply
from talaria.testing.wire_base import arguments_text, finish_reason, pieces, sse, usage_buckets

NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
MESSAGE_KEYS: dict[str, frozenset[str]] = {
    "system": frozenset({"role", "content", "name"}),
    "developer": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset(
        {"role", "content", "name", "tool_calls", "refusal", "audio", "function_call"}
    ),
    "tool": frozenset({"role", "content", "tool_call_id"}),
}
PART_TYPES: dict[str, frozenset[str]] = {
    "system": frozenset({"text"}),
    "developer": frozenset({"text"}),
    "user": frozenset({"text", "image_url", "input_audio", "file"}),
    "assistant": frozenset({"text", "refusal"}),
    "tool": frozenset({"text"}),
}
ERROR_TYPES: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
}


class ChatWire:
    """Chat Completions: /v1/chat/completions."""

    api_mode = "chat_completions"
    path = "/v1/chat/completions"

    def validate(self, body: dict[str, Any]) -> list[str]:
        errors: list[str] = []
        model = body.get("model")
        if not isinstance(model, str) or not model:
            errors.append("you must provide a model parameter")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            errors.append("'messages' must be a non-empty array")
        else:
            errors.extend(_validate_messages(messages))
        errors.extend(_validate_tools(body))
        if body.get("stream_options") is not None and not body.get("stream"):
            errors.append(
                "The 'stream_options' parameter is only allowed when 'stream' is enabled."
            )
        max_tokens = body.get("max_tokens", body.get("max_completion_tokens"))
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            errors.append(f"Invalid 'max_tokens': expected a positive integer, got {max_tokens!r}")
        return errors

    def render(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": reply.text,
            "refusal": reply.refusal,
        }
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": scripted.id,
                    "type": "function",
                    "function": {"name": scripted.name, "arguments": arguments_text(scripted)},
                }
                for scripted in reply.tool_calls
            ]
        choice = {
            "index": 0,
            "message": message,
            "logprobs": None,
            "finish_reason": _wire_finish(reply),
        }
        return {
            **_envelope(body, "chat.completion"),
            "choices": [choice],
            "usage": openai_usage(usage_buckets(reply, body)),
        }

    def render_stream(self, reply: Reply, body: dict[str, Any]) -> list[bytes]:
        head = _envelope(body, "chat.completion.chunk")
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            data: dict[str, Any] = {
                **head,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            if include_usage:
                data["usage"] = None
            return sse(data)

        frames = [chunk({"role": "assistant", "content": ""})]
        size = reply.chunk_size
        frames += [chunk({"reasoning_content": p}) for p in pieces(reply.reasoning or "", size)]
        frames += [chunk({"content": p}) for p in pieces(reply.text or "", size)]
        frames += [chunk({"refusal": p}) for p in pieces(reply.refusal or "", size)]
        for index, scripted in enumerate(reply.tool_calls):
            opening = {
                "index": index,
                "id": scripted.id,
                "type": "function",
                "function": {"name": scripted.name, "arguments": ""},
            }
            frames.append(chunk({"tool_calls": [opening]}))
            for fragment in pieces(arguments_text(scripted), size):
                call = {"index": index, "function": {"arguments": fragment}}
                frames.append(chunk({"tool_calls": [call]}))
        frames.append(chunk({}, _wire_finish(reply)))
        if include_usage:
            usage = openai_usage(usage_buckets(reply, body))
            frames.append(sse({**head, "choices": [], "usage": usage}))
        frames.append(sse("[DONE]"))
        return frames

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind, code = ERROR_TYPES.get(status, ("server_error", None))
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def openai_usage(buckets: dict[str, int]) -> dict[str, Any]:
    """Disjoint buckets in OpenAI's convention: prompt_tokens INCLUDES cached tokens."""
    cached = buckets["cache_read_tokens"]
    written = buckets["cache_write_tokens"]
    prompt = buckets["input_tokens"] + cached + written
    details: dict[str, int] = {"cached_tokens": cached, "audio_tokens": 0}
    if written:
        details["cache_write_tokens"] = written
    return {
        "prompt_tokens": prompt,
        "completion_tokens": buckets["output_tokens"],
        "total_tokens": prompt + buckets["output_tokens"],
        "prompt_tokens_details": details,
        "completion_tokens_details": {
            "reasoning_tokens": buckets["reasoning_tokens"],
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _wire_finish(reply: Reply) -> str:
    """OpenAI reports a refusal as a normal stop; the refusal text carries the meaning."""
    reason = finish_reason(reply)
    return "stop" if reason == "refusal" else reason


def _envelope(body: dict[str, Any], kind: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{os.urandom(12).hex()}",
        "object": kind,
        "created": int(time.time()),
        "model": body.get("model") or "scripted-model",
        "system_fingerprint": "fp_scripted",
    }


def _validate_messages(messages: list[Any]) -> list[str]:
    errors: list[str] = []
    pending: dict[str, int] = {}  # calls of the latest assistant message still unanswered
    previous_role: str | None = None
    for index, message in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(message, dict):
            errors.append(f"{where}: expected an object")
            continue
        role = message.get("role")
        if role not in MESSAGE_KEYS:
            errors.append(f"{where}.role: invalid value {role!r}")
            continue
        unknown = sorted(set(message) - MESSAGE_KEYS[role])
        if unknown:
            errors.append(f"{where}: Unrecognized request argument supplied: {', '.join(unknown)}")
        if role != "tool" and pending:
            errors.append(_unanswered(pending, index))
            pending = {}
        if role == previous_role and role in ("user", "assistant"):
            errors.append(f"{where}: two consecutive '{role}' messages (roles must alternate)")
        errors.extend(_validate_content(message, role, where))
        if role == "assistant":
            pending = _validate_tool_calls(message.get("tool_calls"), where, errors)
        elif role == "tool":
            errors.extend(_answer(message, pending, where))
        previous_role = role
    if pending:
        errors.append(_unanswered(pending, len(messages)))
    return errors


def _unanswered(pending: dict[str, int], index: int) -> str:
    ids = ", ".join(pending)
    return (
        f"messages[{index}]: An assistant message with 'tool_calls' must be followed by tool "
        f"messages responding to each 'tool_call_id'. The following tool_call_ids did not have "
        f"response messages: {ids}"
    )


def _answer(message: dict[str, Any], pending: dict[str, int], where: str) -> list[str]:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or not call_id:
        return [f"{where}.tool_call_id: required string"]
    if call_id not in pending:
        return [
            f"{where}: Invalid parameter: messages with role 'tool' must be a response to a "
            f"preceding message with 'tool_calls' (no pending call {call_id!r})"
        ]
    del pending[call_id]
    return []


def _validate_tool_calls(calls: Any, where: str, errors: list[str]) -> dict[str, int]:
    if calls is None:
        return {}
    if not isinstance(calls, list) or not calls:
        errors.append(f"{where}.tool_calls: expected a non-empty array")
        return {}
    pending: dict[str, int] = {}
    for number, call in enumerate(calls):
        at = f"{where}.tool_calls[{number}]"
        if not isinstance(call, dict):
            errors.append(f"{at}: expected an object")
            continue
        call_id = call.get("id")
        if not isinstance(call_id, str) or not call_id:
            errors.append(f"{at}.id: required string")
        elif call_id in pending:
            errors.append(f"{at}.id: duplicate tool call id {call_id!r}")
        else:
            pending[call_id] = number
        if call.get("type") != "function":
            errors.append(f"{at}.type: expected 'function'")
        function = call.get("function")
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            errors.append(f"{at}.function.name: required string")
        elif not isinstance(function.get("arguments"), str):
            errors.append(f"{at}.function.arguments: expected a string (JSON text)")
    return pending


def _validate_content(message: dict[str, Any], role: str, where: str) -> list[str]:
    content = message.get("content")
    if content is None:
        if role == "assistant" and (message.get("tool_calls") or message.get("refusal")):
            return []
        return [f"{where}.content: required (null only on an assistant message with tool_calls)"]
    if isinstance(content, str):
        return []
    if not isinstance(content, list) or not content:
        return [f"{where}.content: expected a string or a non-empty array of parts"]
    errors: list[str] = []
    for number, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind not in PART_TYPES[role]:
            errors.append(f"{where}.content[{number}].type: {kind!r} not allowed for {role}")
        elif kind == "text" and not isinstance(part.get("text"), str):
            errors.append(f"{where}.content[{number}].text: required string")
    return errors


def _validate_tools(body: dict[str, Any]) -> list[str]:
    tools = body.get("tools")
    if tools is None:
        if body.get("tool_choice") is not None:
            return ["Invalid value for 'tool_choice': only allowed when 'tools' are specified."]
        return []
    if not isinstance(tools, list) or not tools:
        return ["'tools' must be a non-empty array when present"]
    errors: list[str] = []
    seen: set[str] = set()
    for number, tool in enumerate(tools):
        at = f"tools[{number}]"
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function":
            errors.append(f"{at}.type: expected 'function'")
        if not isinstance(function, dict):
            errors.append(f"{at}.function: required object")
            continue
        name = function.get("name")
        if not isinstance(name, str) or not NAME_RE.match(name):
            errors.append(f"{at}.function.name: {name!r} does not match '^[a-zA-Z0-9_-]{{1,64}}$'")
        elif name in seen:
            errors.append(f"{at}.function.name: duplicate tool name {name!r}")
        else:
            seen.add(name)
        parameters = function.get("parameters")
        if parameters is not None and (
            not isinstance(parameters, dict) or parameters.get("type") != "object"
        ):
            errors.append(f"{at}.function.parameters: must be a JSON Schema of 'type: \"object\"'")
    return errors


WIRE = ChatWire()
