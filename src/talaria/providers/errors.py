"""Provider failures as data: one exception type, one kind per failure class.

Adapters convert every SDK exception, HTTP error body and malformed response into a
`ProviderError` whose `kind` decides what the loop does next (retry, refresh, compress, fall
back, fail). The kind-to-action table lives in the resilience layer, not here.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from talaria.messages.redact import redact, redact_body


class ErrorKind(StrEnum):
    RATE_LIMIT = "rate_limit"  # 429
    OVERLOADED = "overloaded"  # 529 and "overloaded" bodies
    SERVER = "server_error"  # 5xx
    AUTH = "auth"  # 401 / 403
    CONTEXT_OVERFLOW = "context_overflow"  # prompt longer than the window
    BAD_REQUEST = "bad_request"  # 400/404/422 not otherwise classified
    TIMEOUT = "timeout"  # no first byte, or the stream went idle
    CONNECTION = "connection"  # reset, refused, dropped mid-stream
    EMPTY_RESPONSE = "empty_response"  # no text, no tool calls
    INVALID_RESPONSE = "invalid_response"  # unparseable body, no choices
    REFUSAL = "refusal"  # the model refused
    TRUNCATED = "truncated"  # tool-call arguments cut off by the output limit
    CONFIG = "config"  # missing key, unknown mode: our side, never retried


class ProviderError(Exception):
    """A failure of one model call, attributed to the provider that produced it."""

    def __init__(
        self,
        message: str,
        *,
        kind: ErrorKind,
        status: int | None = None,
        retry_after: float | None = None,
        provider: str = "",
        model: str = "",
        body: Any = None,
        output_started: bool = False,
    ) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.status = status
        self.retry_after = retry_after
        self.provider = provider
        self.model = model
        self.body = redact_body(body)
        self.output_started = output_started
        """True when visible output had already been streamed before the failure."""

    def __str__(self) -> str:
        where = "/".join(part for part in (self.provider, self.model) if part)
        status = f" {self.status}" if self.status else ""
        prefix = f"[{where}{status}] ".replace("[ ", "[") if where or status else ""
        return f"{prefix}{self.kind.value}: {self.message}"
