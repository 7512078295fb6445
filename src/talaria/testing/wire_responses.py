"""The OpenAI Responses API as the scripted provider speaks it (``POST /v1/responses``).

Stateless like a real call with ``store: false``: every request carries the full input, so
validation checks the whole conversation the way the real API does (tool outputs answer
earlier calls, reasoning replays carry their encrypted content, no chat-format leftovers).
The encrypted reasoning content this wire issues is verifiable, so a test can tell that a
client replayed exactly what it was given.
"""

from __future__ import annotations

import base64
import itertools
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from talaria.testing.script import Reply
from talaria.testing.wire_base import (
    arguments_text,
    finish_reason,
    pieces,
    sse,
    usage_buckets,
)

ENCRYPTED_PREFIX = "talaria-enc:"
"""Encrypted reasoning issued by this wire is this prefix plus the base64 of the summary."""

_TOP_LEVEL = frozenset(
    {
        "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
        "store", "stream", "stream_options", "include", "reasoning", "max_output_tokens",
        "max_tool_calls", "temperature", "top_p", "top_logprobs", "metadata", "text",
        "truncation", "user", "safety_identifier", "prompt_cache_key",
        "prompt_cache_retention", "service_tier", "background", "previous_response_id",
        "conversation", "prompt",
    }
)  # fmt: skip
_INCLUDABLE = frozenset(
    {
        "reasoning.encrypted_content",
        "message.output_text.logprobs",
        "message.input_image.image_url",
        "file_search_call.results",
        "web_search_call.action.sources",
        "code_interpreter_call.outputs",
    }
)
_EFFORTS = frozenset({"none", "minimal", "low", "medium", "high", "xhigh"})
_ROLES = frozenset({"user", "assistant", "system", "developer"})
_INPUT_PARTS = frozenset({"input_text", "input_image", "input_file"})
_ASSISTANT_PARTS = frozenset({"output_text", "refusal"})
_TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
_INCOMPLETE_REASONS = {"length": "max_output_tokens", "content_filter": "content_filter"}
_ERROR_KINDS = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
}


def encrypt_reasoning(summary: str) -> str:
    """The opaque ``encrypted_content`` this wire issues for a reasoning summary."""
    return ENCRYPTED_PREFIX + base64.b64encode(summary.encode()).decode()


class _Checker:
    """Walks one request body and collects every violation, with OpenAI-style parameter paths."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.errors: list[str] = []
        self.pending_calls: dict[str, str] = {}
        self.seen_calls: set[str] = set()

    def fail(self, message: str) -> None:
        self.errors.append(message)

    def run(self) -> list[str]:
        self.check_top_level()
        items = self.body.get("input")
        if isinstance(items, list):
            for index, item in enumerate(items):
                self.check_item(index, item, items[index + 1] if index + 1 < len(items) else None)
            self.flush_pending()
        tools = self.body.get("tools")
        if tools is not None:
            self.check_tools(tools)
        return self.errors

    def check_top_level(self) -> None:
        for key in self.body:
            if key not in _TOP_LEVEL:
                self.fail(f"Unknown parameter: '{key}'.")
        if not isinstance(self.body.get("model"), str):
            self.fail("Missing required parameter: 'model'.")
        if not isinstance(self.body.get("input"), str | list):
            self.fail("Missing required parameter: 'input'.")
        if not isinstance(self.body.get("instructions", ""), str | None):
            self.fail("Invalid type for 'instructions': expected a string.")
        if self.body.get("previous_response_id"):
            self.fail(
                f"Previous response with id '{self.body['previous_response_id']}' not found. "
                "Responses are not persisted when `store` is set to false."
            )
        include = self.body.get("include") or []
        for index, value in enumerate(include if isinstance(include, list) else [include]):
            if value not in _INCLUDABLE:
                self.fail(f"Invalid value: '{value}' for 'include[{index}]'.")
        reasoning = self.body.get("reasoning")
        if isinstance(reasoning, dict) and reasoning.get("effort") not in _EFFORTS | {None}:
            self.fail(f"Invalid value: '{reasoning['effort']}' for 'reasoning.effort'.")

    def check_item(self, index: int, item: Any, following: Any) -> None:
        where = f"input[{index}]"
        if not isinstance(item, dict):
            self.fail(f"Invalid type for '{where}': expected an object.")
            return
        for key in ("tool_calls", "tool_call_id"):
            if key in item:
                self.fail(f"Unknown parameter: '{where}.{key}'.")
        kind = item.get("type", "message" if "role" in item else None)
        check = _ITEM_CHECKS.get(kind) if isinstance(kind, str) else None
        if check is None:
            self.fail(f"Invalid value: '{kind}' for '{where}.type'.")
            return
        check(self, where, item, following)

    def check_message(self, where: str, item: dict[str, Any], following: Any) -> None:
        role = item.get("role")
        if role not in _ROLES:
            self.fail(
                f"Invalid value: '{role}' for '{where}.role'. Supported values are: "
                "'assistant', 'system', 'developer', and 'user'."
            )
            return
        if role == "user":
            self.flush_pending()
        content = item.get("content")
        if isinstance(content, str):
            return
        if not isinstance(content, list):
            self.fail(f"Missing required parameter: '{where}.content'.")
            return
        allowed = _ASSISTANT_PARTS if role == "assistant" else _INPUT_PARTS
        for number, part in enumerate(content):
            part_type = part.get("type") if isinstance(part, dict) else None
            if part_type not in allowed:
                self.fail(
                    f"Invalid value: '{part_type}' for '{where}.content[{number}].type'. "
                    f"Supported values for role '{role}' are: {', '.join(sorted(allowed))}."
                )
            elif part_type in {"input_text", "output_text"} and not isinstance(
                part.get("text"), str
            ):
                self.fail(f"Missing required parameter: '{where}.content[{number}].text'.")

    def check_function_call(self, where: str, item: dict[str, Any], following: Any) -> None:
        call_id = item.get("call_id")
        for key in ("call_id", "name", "arguments"):
            if not isinstance(item.get(key), str):
                self.fail(f"Missing required parameter: '{where}.{key}' (a string).")
        if not isinstance(call_id, str):
            return
        if call_id in self.seen_calls:
            self.fail(f"Duplicate value for '{where}.call_id': '{call_id}'.")
        self.seen_calls.add(call_id)
        self.pending_calls[call_id] = where

    def check_call_output(self, where: str, item: dict[str, Any], following: Any) -> None:
        call_id = item.get("call_id")
        if not isinstance(item.get("output"), str | list):
            self.fail(f"Missing required parameter: '{where}.output'.")
        if call_id not in self.seen_calls:
            self.fail(f"No tool call found for function call output with call_id {call_id}.")
        elif self.pending_calls.pop(call_id, None) is None:
            self.fail(f"Duplicate function call output for call_id {call_id}.")

    def check_reasoning(self, where: str, item: dict[str, Any], following: Any) -> None:
        item_id = item.get("id")
        if not isinstance(item_id, str):
            self.fail(f"Missing required parameter: '{where}.id'.")
        if not isinstance(item.get("summary"), list):
            self.fail(f"Missing required parameter: '{where}.summary'.")
        encrypted = item.get("encrypted_content")
        if not isinstance(encrypted, str):
            self.fail(
                f"Item with id '{item_id}' not found. Items are not persisted when `store` is "
                "set to false. Try again with `store` set to true, or remove this item from "
                "your input."
            )
        elif not _verifiable(encrypted):
            self.fail(f"The encrypted content for item {item_id} could not be verified.")
        next_type = following.get("type", "message") if isinstance(following, dict) else None
        next_role = following.get("role", "assistant") if isinstance(following, dict) else None
        if next_type not in {"function_call", "message", "reasoning"} or next_role != "assistant":
            self.fail(
                f"Item '{item_id}' of type 'reasoning' was provided without its required "
                "following item."
            )

    def flush_pending(self) -> None:
        for call_id in self.pending_calls:
            self.fail(f"No tool output found for function call {call_id}.")
        self.pending_calls.clear()

    def check_tools(self, tools: Any) -> None:
        if not isinstance(tools, list):
            self.fail("Invalid type for 'tools': expected an array.")
            return
        names: set[str] = set()
        for index, tool in enumerate(tools):
            where = f"tools[{index}]"
            if not isinstance(tool, dict) or tool.get("type") != "function":
                kind = tool.get("type") if isinstance(tool, dict) else None
                self.fail(f"Invalid value: '{kind}' for '{where}.type' (only 'function').")
                continue
            if "function" in tool:
                self.fail(f"Unknown parameter: '{where}.function'.")
            name = tool.get("name")
            if not isinstance(name, str):
                self.fail(f"Missing required parameter: '{where}.name'.")
            elif not _TOOL_NAME.match(name):
                self.fail(f"Invalid '{where}.name': string does not match '{_TOOL_NAME.pattern}'.")
            elif name in names:
                self.fail(f"Duplicate tool name: '{name}'.")
            names.add(name if isinstance(name, str) else "")
            if not isinstance(tool.get("parameters", {}), dict | None):
                self.fail(f"Invalid type for '{where}.parameters': expected an object.")


_ITEM_CHECKS: dict[str, Callable[[_Checker, str, dict[str, Any], Any], None]] = {
    "message": _Checker.check_message,
    "function_call": _Checker.check_function_call,
    "function_call_output": _Checker.check_call_output,
    "reasoning": _Checker.check_reasoning,
}


def _verifiable(encrypted: str) -> bool:
    if not encrypted.startswith(ENCRYPTED_PREFIX):
        return False
    try:
        base64.b64decode(encrypted[len(ENCRYPTED_PREFIX) :], validate=True).decode()
    except ValueError:
        return False
    return True


class ResponsesWire:
    """`WireFormat` for the Responses API: stateless validation, JSON and SSE rendering."""

    api_mode = "codex_responses"
    path = "/v1/responses"

    def __init__(self) -> None:
        self._ids = itertools.count(1)

    def _id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):024x}"

    def validate(self, body: dict[str, Any]) -> list[str]:
        return _Checker(body).run()

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        kind, code = _ERROR_KINDS.get(status, ("server_error", None))
        return {"error": {"message": message, "type": kind, "param": None, "code": code}}

    def render(self, reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
        items = [done for _, done in self._output_items(reply, body)]
        return self._response(reply, body, items, self._id("resp"), final=True)

    def render_stream(self, reply: Reply, body: dict[str, Any]) -> list[bytes]:
        response_id = self._id("resp")
        started = self._response(reply, body, [], response_id, final=False)
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": started},
            {"type": "response.in_progress", "response": started},
        ]
        finished: list[dict[str, Any]] = []
        for index, (added, done) in enumerate(self._output_items(reply, body)):
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": added}
            )
            events.extend(_item_deltas(done, index, reply.chunk_size))
            events.append(
                {"type": "response.output_item.done", "output_index": index, "item": done}
            )
            finished.append(done)
        final = self._response(reply, body, finished, response_id, final=True)
        closing = "response.completed" if final["status"] == "completed" else "response.incomplete"
        events.append({"type": closing, "response": final})
        return [
            sse({**event, "sequence_number": number}, event=event["type"])
            for number, event in enumerate(events)
        ]

    def _output_items(
        self, reply: Reply, body: dict[str, Any]
    ) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        """Each output item twice: as announced (empty) and as finished."""
        status = "incomplete" if finish_reason(reply) in _INCOMPLETE_REASONS else "completed"
        if reply.reasoning:
            done: dict[str, Any] = {
                "id": self._id("rs"),
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": reply.reasoning}],
                "encrypted_content": None,
            }
            if "reasoning.encrypted_content" in (body.get("include") or []):
                done["encrypted_content"] = encrypt_reasoning(reply.reasoning)
            yield {**done, "summary": [], "encrypted_content": None}, done
        if reply.text is not None or reply.refusal is not None:
            content: list[dict[str, Any]] = []
            if reply.refusal is not None:
                content.append({"type": "refusal", "refusal": reply.refusal})
            if reply.text is not None:
                content.append(
                    {"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}
                )
            message: dict[str, Any] = {
                "id": self._id("msg"),
                "type": "message",
                "role": "assistant",
            }
            added = {**message, "status": "in_progress", "content": []}
            yield added, {**message, "status": status, "content": content}
        for scripted in reply.tool_calls:
            call: dict[str, Any] = {"id": self._id("fc"), "type": "function_call"}
            call.update(call_id=scripted.id, name=scripted.name)
            added = {**call, "arguments": "", "status": "in_progress"}
            yield added, {**call, "arguments": arguments_text(scripted), "status": status}

    def _response(
        self,
        reply: Reply,
        body: dict[str, Any],
        output: list[dict[str, Any]],
        response_id: str,
        final: bool,
    ) -> dict[str, Any]:
        reason = _INCOMPLETE_REASONS.get(finish_reason(reply))
        status = ("incomplete" if reason else "completed") if final else "in_progress"
        tools = [
            {
                "type": "function",
                "name": tool.get("name"),
                "description": tool.get("description"),
                "parameters": tool.get("parameters"),
                "strict": tool.get("strict", True),
            }
            for tool in body.get("tools") or []
        ]
        return {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "status": status,
            "model": body.get("model"),
            "output": output,
            "instructions": body.get("instructions"),
            "tools": tools,
            "tool_choice": body.get("tool_choice", "auto"),
            "parallel_tool_calls": body.get("parallel_tool_calls", True),
            "store": body.get("store", True),
            "temperature": body.get("temperature", 1.0),
            "top_p": body.get("top_p", 1.0),
            "max_output_tokens": body.get("max_output_tokens"),
            "reasoning": body.get("reasoning") or {"effort": None, "summary": None},
            "text": {"format": {"type": "text"}},
            "truncation": body.get("truncation", "disabled"),
            "metadata": body.get("metadata") or {},
            "previous_response_id": None,
            "error": None,
            "incomplete_details": {"reason": reason} if final and reason else None,
            "usage": _usage(reply, body) if final else None,
        }


def _usage(reply: Reply, body: dict[str, Any]) -> dict[str, Any]:
    """OpenAI's convention: input_tokens includes the cached (and cache-written) tokens."""
    buckets = usage_buckets(reply, body)
    cached, written = buckets["cache_read_tokens"], buckets["cache_write_tokens"]
    total_input = buckets["input_tokens"] + cached + written
    return {
        "input_tokens": total_input,
        "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": written},
        "output_tokens": buckets["output_tokens"],
        "output_tokens_details": {"reasoning_tokens": buckets["reasoning_tokens"]},
        "total_tokens": total_input + buckets["output_tokens"],
    }


def _item_deltas(item: dict[str, Any], index: int, size: int) -> list[dict[str, Any]]:
    """The events between an item's ``added`` and ``done``, text cut in ``size`` pieces."""
    at = {"item_id": item["id"], "output_index": index}
    kind = item["type"]
    if kind == "reasoning":
        summary = item["summary"][0]["text"]
        part = {**at, "summary_index": 0}
        empty = {"type": "summary_text", "text": ""}
        return [
            {"type": "response.reasoning_summary_part.added", **part, "part": empty},
            *(
                {"type": "response.reasoning_summary_text.delta", **part, "delta": delta}
                for delta in pieces(summary, size)
            ),
            {"type": "response.reasoning_summary_text.done", **part, "text": summary},
            {
                "type": "response.reasoning_summary_part.done",
                **part,
                "part": {"type": "summary_text", "text": summary},
            },
        ]
    if kind == "function_call":
        arguments = item["arguments"]
        return [
            *(
                {"type": "response.function_call_arguments.delta", **at, "delta": delta}
                for delta in pieces(arguments, size)
            ),
            {"type": "response.function_call_arguments.done", **at, "arguments": arguments},
        ]
    events: list[dict[str, Any]] = []
    for number, part in enumerate(item["content"]):
        events.extend(_content_deltas(part, {**at, "content_index": number}, size))
    return events


def _content_deltas(part: dict[str, Any], at: dict[str, Any], size: int) -> list[dict[str, Any]]:
    if part["type"] == "refusal":
        refusal = part["refusal"]
        empty: dict[str, Any] = {"type": "refusal", "refusal": ""}
        deltas = [
            {"type": "response.refusal.delta", **at, "delta": delta}
            for delta in pieces(refusal, size)
        ]
        done = {"type": "response.refusal.done", **at, "refusal": refusal}
    else:
        text = part["text"]
        empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
        deltas = [
            {"type": "response.output_text.delta", **at, "delta": delta, "logprobs": []}
            for delta in pieces(text, size)
        ]
        done = {"type": "response.output_text.done", **at, "text": text, "logprobs": []}
    return [
        {"type": "response.content_part.added", **at, "part": empty},
        *deltas,
        done,
        {"type": "response.content_part.done", **at, "part": part},
    ]


WIRE = ResponsesWire()
