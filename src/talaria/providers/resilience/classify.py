"""Turn any exception from a model call into a `ProviderError` with the right kind.

Works by duck typing (``status_code``, ``headers`` or ``response.headers``, ``body``, class
names): for talaria's own transport errors, raw httpx/httpx2 errors and the official SDKs'
errors alike, without importing any of them. The message is the provider's own, one line.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Mapping
from typing import Any

from talaria.providers.errors import ErrorKind, ProviderError

MAX_MESSAGE = 300

TIMEOUT_CLASSES = frozenset({"APITimeoutError", "TimeoutException"})
CONNECTION_CLASSES = frozenset(
    {
        "APIConnectionError",
        "TransportError",
        "NetworkError",
        "RemoteProtocolError",
        "ProtocolError",
        "EndOfStream",
        "ClosedResourceError",
        "BrokenResourceError",
    }
)
INVALID_CLASSES = frozenset({"APIResponseValidationError", "JSONDecodeError"})
CONFIG_CLASSES = frozenset(
    {"BadURLError", "InvalidURL", "UnsupportedProtocol", "InvalidHeaderError"}
)
"""A base URL or header no request can be sent with: fixing the configuration is the only cure."""

BODY_TYPES: dict[str, ErrorKind] = {
    "overloaded_error": ErrorKind.OVERLOADED,
    "rate_limit_error": ErrorKind.RATE_LIMIT,
    "rate_limit_exceeded": ErrorKind.RATE_LIMIT,
    "api_error": ErrorKind.SERVER,
    "server_error": ErrorKind.SERVER,
    "authentication_error": ErrorKind.AUTH,
    "permission_error": ErrorKind.AUTH,
    "invalid_api_key": ErrorKind.AUTH,
    "timeout_error": ErrorKind.TIMEOUT,
    "invalid_request_error": ErrorKind.BAD_REQUEST,
    "not_found_error": ErrorKind.BAD_REQUEST,
    "request_too_large": ErrorKind.BAD_REQUEST,
}
"""Error types found in bodies without an HTTP error status (errors sent inside a stream)."""

STATUS_KINDS: dict[int, ErrorKind] = {
    401: ErrorKind.AUTH,
    402: ErrorKind.AUTH,  # OpenRouter and others: out of credits; another provider may work
    403: ErrorKind.AUTH,
    408: ErrorKind.TIMEOUT,
    429: ErrorKind.RATE_LIMIT,
    529: ErrorKind.OVERLOADED,
}

CONTEXT_OVERFLOW_RE = re.compile(
    r"context[_ ]length[_ ]exceeded"  # OpenAI code
    r"|maximum context length"  # OpenAI, OpenRouter, vLLM
    r"|prompt is too long|prompt too long"  # Anthropic, Ollama
    r"|exceeds? (?:the )?(?:available |model'?s? )?context"  # llama.cpp, Ollama, Anthropic
    r"|exceed_context_size"  # llama.cpp error type
    r"|context (?:window|limit) (?:exceeded|is full)"
    r"|longer than the (?:maximum model length|model'?s context length)"  # vLLM
    r"|too many (?:input )?tokens"
    r"|reduce the length of the (?:messages|input|prompt)"
    r"|input (?:is )?too long",
    re.IGNORECASE,
)
OVERLOADED_RE = re.compile(r"overloaded", re.IGNORECASE)


def classify_exception(
    exc: BaseException, *, provider: str, model: str, output_started: bool = False
) -> ProviderError:
    """The `ProviderError` a failed call stands for; an existing one passes through."""
    if isinstance(exc, ProviderError):
        exc.output_started = exc.output_started or output_started
        exc.provider = exc.provider or provider
        exc.model = exc.model or model
        return exc
    kind = _transport_kind(exc)
    if kind is None:
        return classify_http(
            _status(exc),
            getattr(exc, "body", None),
            _headers(exc),
            provider=provider,
            model=model,
            output_started=output_started,
            default_message=_exception_text(exc),
        )
    return ProviderError(
        _one_line(_exception_text(exc)),
        kind=kind,
        provider=provider,
        model=model,
        output_started=output_started,
    )


_HONOURS_RETRY_AFTER = frozenset({ErrorKind.RATE_LIMIT, ErrorKind.OVERLOADED, ErrorKind.SERVER})


def classify_http(
    status: int | None,
    body: Any,
    headers: Mapping[str, str],
    *,
    provider: str,
    model: str,
    output_started: bool = False,
    default_message: str = "",
) -> ProviderError:
    """The `ProviderError` for an HTTP error answer (or an error event inside a stream, when
    ``status`` is None); ``headers`` with lowercase keys."""
    message, error_type = _error_info(body)
    if status is None:
        has_error = bool(message or error_type)
        kind = _body_kind(message, error_type) if has_error else ErrorKind.INVALID_RESPONSE
    else:
        kind = _status_kind(status, f"{error_type} {message}")
    return ProviderError(
        _one_line(message or default_message or f"HTTP {status}"),
        kind=kind,
        status=status,
        retry_after=retry_after(headers) if kind in _HONOURS_RETRY_AFTER else None,
        provider=provider,
        model=model,
        body=body,
        output_started=output_started,
    )


def _transport_kind(exc: BaseException) -> ErrorKind | None:
    """The kind of failures that happen below HTTP status codes; None for the others."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & CONFIG_CLASSES:
        return ErrorKind.CONFIG
    if names & INVALID_CLASSES or isinstance(exc, ValueError):
        return ErrorKind.INVALID_RESPONSE
    if names & TIMEOUT_CLASSES or isinstance(exc, TimeoutError):
        return ErrorKind.TIMEOUT
    if names & CONNECTION_CLASSES or isinstance(exc, OSError):
        return ErrorKind.CONNECTION
    return None


def _status_kind(status: int, text: str) -> ErrorKind:
    if status in STATUS_KINDS:
        return STATUS_KINDS[status]
    if status >= 500:
        return ErrorKind.OVERLOADED if OVERLOADED_RE.search(text) else ErrorKind.SERVER
    if status in (400, 413) and CONTEXT_OVERFLOW_RE.search(text):
        return ErrorKind.CONTEXT_OVERFLOW
    if 400 <= status < 500:
        return ErrorKind.BAD_REQUEST
    return _body_kind(text, "")


def _body_kind(message: str, error_type: str) -> ErrorKind:
    """An error reported inside a 200 stream: trust its type, else assume the server failed."""
    if CONTEXT_OVERFLOW_RE.search(f"{error_type} {message}"):
        return ErrorKind.CONTEXT_OVERFLOW
    if error_type in BODY_TYPES:
        return BODY_TYPES[error_type]
    return ErrorKind.OVERLOADED if OVERLOADED_RE.search(message) else ErrorKind.SERVER


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = getattr(getattr(exc, "response", None), "status_code", None)
    return status if isinstance(status, int) and status >= 400 else None


def _error_info(body: Any) -> tuple[str, str]:
    """(message, type-or-code) from the error shapes of OpenAI, Anthropic, OpenRouter, vLLM,
    llama.cpp, Ollama and FastAPI servers."""
    if isinstance(body, str):
        return body, ""
    if not isinstance(body, Mapping):
        return "", ""
    inner = body.get("error")
    if isinstance(inner, Mapping):
        return _error_info(inner)
    if isinstance(inner, str):
        return inner, ""
    message = body.get("message") or body.get("detail") or ""
    for key in ("code", "type"):
        value = body.get(key)
        if isinstance(value, str) and value not in ("error", ""):
            return str(message), value
    return str(message), ""


def _exception_text(exc: BaseException) -> str:
    text = str(getattr(exc, "message", "") or exc) or type(exc).__name__
    cause = exc.__cause__  # its own cause only: not whatever was being handled when it arose
    if cause is not None and str(cause) and str(cause) not in text:
        text = f"{text} ({cause})"
    return text


def _one_line(message: str) -> str:
    line = " ".join(message.split())
    return line if len(line) <= MAX_MESSAGE else line[: MAX_MESSAGE - 3] + "..."


def _headers(exc: BaseException) -> dict[str, str]:
    headers = getattr(exc, "headers", None)
    if not isinstance(headers, Mapping):
        headers = getattr(getattr(exc, "response", None), "headers", None)
    if headers is None:
        return {}
    return {str(key).lower(): str(value) for key, value in headers.items()}


def retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait before retrying, from the headers the providers send (lowercase keys).

    ``retry-after-ms`` wins (most precise), then ``retry-after`` (seconds or an HTTP date),
    then the longest of OpenAI's ``x-ratelimit-reset-*`` durations ("1s", "6m0s", "20ms").
    """
    if "retry-after-ms" in headers:
        with contextlib.suppress(ValueError):
            return max(0.0, float(headers["retry-after-ms"]) / 1000)
    value = headers.get("retry-after")
    if value:
        with contextlib.suppress(ValueError):
            return max(0.0, float(value))
        from email.utils import parsedate_to_datetime  # 10 ms of imports, for a rare header

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            when = None
        if when is not None:
            return max(0.0, when.timestamp() - (time.time() if now is None else now))
    resets = [parse_duration(v) for k, v in headers.items() if k.startswith("x-ratelimit-reset")]
    known = [seconds for seconds in resets if seconds is not None]
    return max(known) if known else None


_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def parse_duration(text: str) -> float | None:
    """Seconds in "1h2m3.5s" / "20ms" / "7" form; None when unreadable."""
    text = text.strip()
    with contextlib.suppress(ValueError):
        return max(0.0, float(text))
    parts = _DURATION_RE.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)
