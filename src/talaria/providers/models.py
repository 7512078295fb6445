"""How many tokens a model can see: the number compression decisions are made against.

Sources in order of trust: what the user configured (``model.context_length``), what the
serving endpoint reports about itself (local servers know their real ``--ctx-size``), our table
of published windows, and finally a conservative default with a warning.
"""

from __future__ import annotations

import json
import logging
from functools import cache
from importlib import resources
from typing import Any

log = logging.getLogger(__name__)

_METADATA_FIELDS: tuple[tuple[str, ...], ...] = (
    ("context_length",),  # OpenRouter, LM Studio
    ("max_model_len",),  # vLLM
    ("context_window",),  # Groq and others
    ("max_context_length",),  # LM Studio's native API
    ("top_provider", "context_length"),  # OpenRouter, per serving provider
    ("meta", "n_ctx_train"),  # llama.cpp server
)
"""Where OpenAI-compatible servers put a model's window in their ``GET /models`` entries."""


@cache
def _table() -> dict[str, Any]:
    text = resources.files("talaria").joinpath("data/context_windows.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def table_context_window(model: str) -> int | None:
    """The published window for ``model`` (longest matching id prefix), or None."""
    bare = model.rpartition("/")[2].lower()
    windows: dict[str, int] = _table()["windows"]
    matches = [prefix for prefix in windows if bare.startswith(prefix)]
    return windows[max(matches, key=len)] if matches else None


def context_window(
    model: str, *, configured: int | None, endpoint_metadata: int | None
) -> tuple[int, str]:
    """The window and where it came from: "config", "endpoint", "table" or "default"."""
    if configured:
        return configured, "config"
    if endpoint_metadata:
        return endpoint_metadata, "endpoint"
    known = table_context_window(model)
    if known:
        return known, "table"
    default = int(_table()["default"])
    log.warning(
        "context window of %r is unknown; assuming %d tokens (set model.context_length)",
        model,
        default,
    )
    return default, "default"


async def fetch_endpoint_context_length(
    base_url: str, api_key: str | None, model: str
) -> int | None:
    """Ask ``GET {base_url}/models`` for the model's window; None on any failure (2 s budget).

    A server listing one model is taken to serve it whatever name the user gave it (llama.cpp
    and single-model vLLM answer under any name).
    """
    import httpx

    from talaria.providers.sdk import tls_verify

    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with httpx.AsyncClient(timeout=2.0, verify=tls_verify(base_url)) as client:
            response = await client.get(f"{base_url.rstrip('/')}/models", headers=headers)
            response.raise_for_status()
            entries = response.json().get("data")
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    if not isinstance(entries, list):
        return None
    entry = next((e for e in entries if isinstance(e, dict) and e.get("id") == model), None)
    if entry is None and len(entries) == 1 and isinstance(entries[0], dict):
        entry = entries[0]
    return _window_of(entry) if entry is not None else None


def _window_of(entry: dict[str, Any]) -> int | None:
    for path in _METADATA_FIELDS:
        value: Any = entry
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None
