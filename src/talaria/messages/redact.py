"""Secrets out of the conversation: known key shapes and the agent's own keys are replaced by a
readable marker before a tool result or an error message is stored or sent.

The marker (`[REDACTED:openai-key]`) tells the model something was there, so it does not
retry the read hoping for a different answer, and tells a human reading the session why the
text is missing. Redaction is by shape (provider keys, bearer tokens, private key blocks,
AWS and GitHub tokens, `NAME_KEY=value` assignments) and by value: every key the agent was
configured with is remembered, whatever its shape.
"""

from __future__ import annotations

import functools
import re
import threading
from typing import Any, NamedTuple

MIN_REMEMBERED = 10
"""Shorter configured "keys" (placeholders such as `test`) are not worth a marker."""


class _Patterns(NamedTuple):
    shapes: tuple[tuple[str, re.Pattern[str]], ...]
    bearer: re.Pattern[str]
    assignment: re.Pattern[str]
    marker: re.Pattern[str]


@functools.cache
def _patterns() -> _Patterns:
    """Compiled on the first redaction, not at import (before an agent's first request)."""
    shapes = (
        (
            "private-key",
            re.compile(
                r"-----BEGIN ([A-Z0-9 ]*)PRIVATE KEY-----[\s\S]*?(?:-----END \1PRIVATE KEY-----|\Z)"
            ),
        ),
        ("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{16,}")),
        ("openrouter-key", re.compile(r"\bsk-or-[A-Za-z0-9_-]{16,}")),
        ("openai-key", re.compile(r"\bsk-[A-Za-z0-9_-]{16,}")),
        ("aws-access-key", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
        (
            "github-token",
            re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})"),
        ),
        ("google-api-key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
        ("slack-token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    )
    bearer = re.compile(r"(?i)(\bbearer\s+)([A-Za-z0-9._~+/=-]{12,})")
    assignment = re.compile(
        r"(?im)^(\s*(?:export\s+)?[\w.-]*?(?:api[_-]?key|apikey|secret|token(?!s|iz)|passw(?:or)?d"
        r"|access[_-]?key|private[_-]?key|credentials?)[\w.-]*\s*[:=]\s*)(['\"]?)([^\s'\"#]{8,})\2"
    )
    return _Patterns(shapes, bearer, assignment, re.compile(r"\[REDACTED:[a-z-]+\]"))


_known: dict[str, str] = {}
_encoded: set[str] = set()
"""The base64 forms among `_known`: `base64` wraps its output, so these are also looked for
across line breaks."""
_known_lock = threading.Lock()


def remember_secret(value: str | None, label: str = "configured-key") -> None:
    """Redact `value` wherever it appears from now on (the agent's own API keys), also
    reversed and base64-encoded (`rev`, `base64` and both together cannot carry it out)."""
    if value and len(value) >= MIN_REMEMBERED:
        plain, encoded = _disguises(value)
        with _known_lock:
            for form in (*plain, *encoded):
                _known.setdefault(form, label)
            _encoded.update(encoded)


def _disguises(value: str) -> tuple[list[str], list[str]]:
    """`value` as itself and reversed; and base64-encoded (standard and URL-safe alphabets,
    the value and its reverse, the encoding and its reverse) at each of the three alignments
    a longer stream can put it in: the characters that depend on the value alone."""
    import base64

    encoded: list[str] = []
    for text in (value, value[::-1]):
        data = text.encode("utf-8")
        for start in range(3):
            whole = data[start:][: (len(data) - start) // 3 * 3]
            form = base64.b64encode(whole).decode("ascii")
            encoded += [form, form.translate(_URLSAFE), form[::-1]]
    return [value, value[::-1]], [f for f in dict.fromkeys(encoded) if len(f) >= MIN_REMEMBERED]


_URLSAFE = str.maketrans("+/", "-_")


def _marker(label: str) -> str:
    return f"[REDACTED:{label}]"


def redact(text: str) -> str:
    """`text` with every secret it contains replaced by a `[REDACTED:kind]` marker."""
    if not text:
        return text
    with _known_lock:
        known = sorted(_known.items(), key=lambda item: -len(item[0]))
        encoded = set(_encoded)
    flat = text.replace("\n", "") if "\n" in text else None
    for value, label in known:
        if value in text:
            text = text.replace(value, _marker(label))
        elif flat is not None and value in encoded and value in flat:
            text = re.sub(r"\r?\n?".join(map(re.escape, value)), _marker(label), text)
    patterns = _patterns()
    for label, shape in patterns.shapes:
        text = shape.sub(_marker(label), text)
    text = patterns.bearer.sub(lambda m: m.group(1) + _marker("bearer-token"), text)
    return patterns.assignment.sub(_assignment, text)


def redact_body(body: Any) -> Any:
    """An error body (parsed JSON or text) with every string in it redacted."""
    if isinstance(body, str):
        return redact(body)
    if isinstance(body, dict):
        return {key: redact_body(value) for key, value in body.items()}
    if isinstance(body, list):
        return [redact_body(item) for item in body]
    return body


def _assignment(match: re.Match[str]) -> str:
    value = match.group(3)
    if _patterns().marker.fullmatch(value) or value.startswith("[REDACTED:"):
        return match.group(0)
    quote = match.group(2)
    return f"{match.group(1)}{quote}{_marker('secret')}{quote}"
