"""What crosses the Temporal boundary: inputs and outputs of the turn workflow and of its
activities, plus the JSON forms of the loop's own types (requests, responses, events).

Everything here is plain data (JSON-friendly dataclasses and dicts) and imports nothing with
side effects, because the workflow sandbox imports it too. Secrets never enter these types:
API keys stay on the workers, so the workflow history holds none.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, cast

from talaria.core import Message, ModelRequest, ModelResponse, ToolCall, Usage
from talaria.providers.errors import ErrorKind, ProviderError

WORKFLOW_NAME = "TalariaTurn"
AGENT_OVERRIDES = ("model", "provider", "base_url", "api_mode", "toolsets", "max_turns")
"""What one turn may choose differently from the worker's defaults (never the API key)."""


@dataclass
class TurnInput:
    user_message: str
    session_ref: str | None = None
    """A session id, title or "latest" to continue; None starts a new session."""
    system_message: str | None = None
    task_id: str = ""
    agent: dict[str, Any] = field(default_factory=dict)
    """Overrides of the worker's agent settings, keys from `AGENT_OVERRIDES`."""
    answers: bool = False
    """A client answers approvals and clarify questions; otherwise the headless rule holds
    (approvals are denied, clarify is not offered)."""
    deltas: bool = True
    """Stream the model's deltas into the event log (off for batches: nobody watches)."""


@dataclass
class TurnSetup:
    """What the worker knows and the workflow needs: the session as stored, the model chain,
    the tools, and the settings of talaria's own policy (retries, timeouts)."""

    session_id: str
    system_prompt: str | None
    history: list[dict[str, Any]]
    chain: list[dict[str, str]]
    tools: list[dict[str, Any]]
    """Per tool: name, schema, interactive, retry_safe, timeout."""
    config: dict[str, Any]
    """The settings the loop reads (model.max_tokens, prompt_caching, retry, ...)."""
    max_iterations: int
    stream: bool
    task_id: str
    writer: str = ""
    """The turn's lease on the session (the same owner on every worker)."""
    busy: str | None = None
    """Set when another writer holds the session: the turn does not start."""
    session_usage: dict[str, Any] | None = None
    """The session's stored usage totals before this turn (for the per-session budgets)."""
    queued: list[dict[str, Any]] = field(default_factory=list)
    """Messages the store keeps queued for the session (a process that ended before running
    them): the workflow runs them after its turns."""


@dataclass
class Unsaved:
    """Messages the session store does not hold yet, numbered from `first_seq`."""

    first_seq: int
    messages: list[dict[str, Any]]


@dataclass
class ModelCallInput:
    session_id: str
    task_id: str
    entry: int
    """Which entry of the chain (0 the primary, then the fallbacks)."""
    request: dict[str, Any]
    agent: dict[str, Any] = field(default_factory=dict)
    unsaved: Unsaved | None = None
    """Saved before the request is sent (nothing lost, docs/architecture.md), in the same
    activity."""
    writer: str = ""
    deltas: bool = True
    separator: str = ""
    """Streamed before the call's first text (an earlier step of the turn spoke)."""


@dataclass
class ToolCallInput:
    session_id: str
    task_id: str
    call: dict[str, str]
    answers: dict[str, str] = field(default_factory=dict)
    """Answers to the requests this call raised before, by request id."""
    session_grants: list[str] = field(default_factory=list)
    interactive: bool = False
    agent: dict[str, Any] = field(default_factory=dict)


@dataclass
class ToolCallOutput:
    content: str = ""
    is_error: bool = False
    halt: str | None = None
    needs: dict[str, Any] | None = None
    """An approval or clarify request the call must have answered before it can run."""
    session_grants: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class SummaryInput:
    """The compression's summary request, run on a worker's `compression` model."""

    session_id: str
    messages: list[dict[str, Any]]
    agent: dict[str, Any] = field(default_factory=dict)


@dataclass
class ContinueInput:
    """Compression's hand-over: the parent's last messages are saved, then the compressed
    history continues in `child_id` (one store transaction, done at most once)."""

    parent_id: str
    child_id: str
    messages: list[dict[str, Any]]
    system_prompt: str | None
    model: str = ""
    provider: str = ""
    api_mode: str = ""
    unsaved: Unsaved | None = None
    writer: str = ""


@dataclass
class FinishInput:
    session_id: str
    usage: dict[str, Any]
    model: str = ""
    provider: str = ""
    api_mode: str = ""
    unsaved: Unsaved | None = None
    writer: str = ""
    records: list[dict[str, Any]] = field(default_factory=list)
    """Per model: model, provider, calls, usage (what `talaria usage` reports)."""
    span: dict[str, Any] = field(default_factory=dict)
    """The turn as its `invoke_agent` span records it (see `durable/turn_span.py`)."""


@dataclass
class StoredQueue:
    """A change to the session's queue in the store: `notes` (`UserNote.to_state()` each) are
    added (messages a workflow did not run) or, with `taken`, removed (messages a workflow
    adopted from the store and runs itself)."""

    session_id: str
    notes: list[dict[str, Any]]
    taken: bool = False


def request_id(kind: str, call_id: str) -> str:
    """Request ids come from the call id, so a replayed or retried call asks the same one."""
    return f"{kind}:{call_id}"


# -- JSON forms of the loop's types ---------------------------------------------------------


def payload_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as the payloads declare them (plain JSON objects: the converter then passes
    them through as they are); the same list, not a copy."""
    return cast(list[dict[str, Any]], messages)


def loop_messages(messages: list[dict[str, Any]]) -> list[Message]:
    """Messages from a payload, as the loop types them; the same list, not a copy."""
    return cast(list[Message], messages)


def request_to_dict(request: ModelRequest) -> dict[str, Any]:
    return dataclasses.asdict(request)


def request_from_dict(data: dict[str, Any]) -> ModelRequest:
    return ModelRequest(**data)


def response_to_dict(response: ModelResponse) -> dict[str, Any]:
    return dataclasses.asdict(response)


def response_from_dict(data: dict[str, Any]) -> ModelResponse:
    fields = dict(data)
    fields["tool_calls"] = [ToolCall(**call) for call in fields.get("tool_calls") or []]
    fields["usage"] = Usage(**(fields.get("usage") or {}))
    return ModelResponse(**fields)


def error_to_dict(error: ProviderError) -> dict[str, Any]:
    return {
        "message": error.message,
        "kind": error.kind.value,
        "status": error.status,
        "retry_after": error.retry_after,
        "provider": error.provider,
        "model": error.model,
        "output_started": error.output_started,
    }


def error_from_dict(data: dict[str, Any]) -> ProviderError:
    return ProviderError(
        data["message"],
        kind=ErrorKind(data["kind"]),
        status=data.get("status"),
        retry_after=data.get("retry_after"),
        provider=data.get("provider") or "",
        model=data.get("model") or "",
        output_started=bool(data.get("output_started")),
    )


def event_to_dict(event: Any) -> dict[str, Any]:
    """An engine event as `{"type": "<class name>", ...its fields}`."""
    return {"type": type(event).__name__, **dataclasses.asdict(event)}
