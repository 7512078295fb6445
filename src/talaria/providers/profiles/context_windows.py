"""How many tokens a model can see: the number compression decisions are made against.

Sources in order of trust: what the user configured (``model.context_length``), what the
serving endpoint reports about itself (local servers know their real ``--ctx-size``), our table
of published windows, and finally a default (the context engine warns when a decision rests on
it).
"""

from __future__ import annotations

import asyncio
import json
import logging
from functools import cache
from typing import Any

log = logging.getLogger(__name__)

_METADATA_FIELDS: tuple[tuple[str, ...], ...] = (
    ("context_length",),  # OpenRouter, LM Studio
    ("max_model_len",),  # vLLM
    ("context_window",),  # Groq and others
    ("max_context_length",),  # LM Studio's native API
    ("top_provider", "context_length"),  # OpenRouter, per serving provider
    ("meta", "n_ctx_train"),  # llama.cpp: the training context, only if /props is silent
)
"""Where OpenAI-compatible servers put a model's window in their ``GET /models`` entries."""


@cache
def _table() -> dict[str, Any]:
    from importlib import resources  # loaded by the first lookup, not at import

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
    log.info("context window of %r is unknown; assuming %d tokens", model, default)
    return default, "default"


OLLAMA_DEFAULT_NUM_CTX = 4096
"""What Ollama serves when neither the model's parameters nor the request set num_ctx."""


PROBE_SECONDS = 2.0
_probed: dict[tuple[str, str, str], int | None] = {}
_served_by: dict[str, str] = {}
"""Loopback base URL -> the kind of local server the probe found answering there."""
_probing: dict[tuple[str, str, str], asyncio.Future[int | None]] = {}


async def fetch_endpoint_context_length(
    base_url: str, api_key: str | None, model: str, api_mode: str = "chat_completions"
) -> int | None:
    """The window the server actually serves ``model`` with; None when nothing says.

    Asked once per endpoint and model per process (agents share the answer, also while the
    first probe is still in flight), through the shared HTTP pool, each request limited to
    2 s; an unreachable or malformed URL simply yields None.
    """
    key = (base_url, model, api_mode)
    if key in _probed:
        return _probed[key]
    pending = _probing.get(key)
    if pending is not None and pending.get_loop() is asyncio.get_running_loop():
        return await asyncio.shield(pending)
    future = _probing[key] = asyncio.get_running_loop().create_future()
    try:
        size = await _probe(base_url, api_key, model, api_mode)
    except BaseException:
        future.cancel()
        raise
    finally:
        _probing.pop(key, None)
    _probed[key] = size
    future.set_result(size)
    return size


def forget_endpoint_windows() -> None:
    """Drop the remembered answers, e.g. after restarting a local server with another
    ``--ctx-size`` in a long-running process."""
    _probed.clear()
    _served_by.clear()
    _recognised.clear()


def served_by(base_url: str) -> str | None:
    """The kind of local server (``llamacpp``, ``ollama``, ``lmstudio``, ``vllm``) the window
    probe or `recognise_local_server` found at a loopback `base_url`; None when none was found
    or none was asked."""
    return _served_by.get(base_url.rstrip("/"))


_KIND_PATHS = (("/props", "llamacpp"), ("/api/version", "ollama"), ("/api/v0/models", "lmstudio"))
_recognised: set[str] = set()


async def recognise_local_server(base_url: str, api_key: str | None, api_mode: str) -> None:
    """Ask a loopback `base_url` which local server it is, once per process, one request at a
    time (on loopback each takes about a millisecond, and one kept-alive connection serves
    them all): llama.cpp's ``/props``, Ollama's ``/api/version``, LM Studio's
    ``/api/v0/models``, then vLLM's ``owned_by`` in ``/v1/models``. `served_by` tells. Not
    asked again after the window probe, which asks the same servers (Ollama by the model)."""
    from talaria.providers.resolve import is_loopback
    from talaria.providers.transport.auth import openai_endpoint

    key = base_url.rstrip("/")
    if key in _recognised or key in _served_by or not is_loopback(base_url):
        return
    _recognised.add(key)
    root = _server_root(base_url, api_mode)
    headers = openai_endpoint(base_url, api_key, env={}).headers
    for path, kind in _KIND_PATHS:
        if isinstance(await _ask(root + path, headers), dict):
            _served_by[key] = kind
            return
    listed = await _ask(root + "/v1/models", headers)
    entries = listed.get("data") if isinstance(listed, dict) else None
    if any(isinstance(e, dict) and e.get("owned_by") == "vllm" for e in entries or ()):
        _served_by[key] = "vllm"


async def _probe(base_url: str, api_key: str | None, model: str, api_mode: str) -> int | None:
    """Asked at once (on loopback one after the other), trusted in this order: llama.cpp's
    ``/props`` (then ``/slots``) ``n_ctx``, LM Studio's loaded context length, Ollama's
    ``num_ctx``, then the fields of the OpenAI-style ``GET /models`` entry (vLLM's
    ``max_model_len``, ...), and last Ollama's default when only Ollama answered. llama.cpp's
    ``/models`` reports the *training* context, which is why the server's own endpoints come
    first.
    """
    from talaria.providers.transport.auth import anthropic_endpoint, openai_endpoint

    root = _server_root(base_url, api_mode)
    if api_mode == "anthropic_messages":
        endpoint = anthropic_endpoint(base_url, api_key)
        models_url = f"{root}/v1/models"
    else:
        endpoint = openai_endpoint(base_url, api_key, env={})
        models_url = f"{endpoint.base_url}/models"
    headers = endpoint.headers
    asks = (
        _ask(f"{root}/props", headers),
        _ask(f"{root}/slots", headers),
        _ask(f"{root}/api/v0/models", headers),
        _ask(f"{root}/api/show", headers, {"model": model}),
        _ask(models_url, headers),
    )
    from talaria.providers.resolve import is_loopback

    local = is_loopback(base_url)
    # on loopback one kept-alive connection answers them all in a few milliseconds, and the
    # turn's request goes out on it next (over https: one handshake, not one per question)
    answers = [await ask for ask in asks] if local else await asyncio.gather(*asks)
    llama, slots, lmstudio, ollama, listed = answers
    kind = _kind(llama, slots, lmstudio, ollama, listed)
    if local:
        _recognised.add(base_url.rstrip("/"))  # what `recognise_local_server` would ask
        if kind is not None:
            _served_by[base_url.rstrip("/")] = kind
    found = (
        _llama_props(llama),
        _llama_slots(slots),
        _lmstudio(lmstudio, model),
        _ollama_num_ctx(ollama),
        _listed(listed, model),
        OLLAMA_DEFAULT_NUM_CTX if isinstance(ollama, dict) and "parameters" in ollama else None,
    )
    return next((size for size in found if size), None)


def _kind(llama: Any, slots: Any, lmstudio: Any, ollama: Any, listed: Any) -> str | None:
    """Which local server answered the probe, from the answers only it gives."""
    if _llama_props(llama) or _llama_slots(slots):
        return "llamacpp"
    if isinstance(ollama, dict) and ("parameters" in ollama or "modelfile" in ollama):
        return "ollama"
    if isinstance(lmstudio, dict) and isinstance(lmstudio.get("data"), list):
        return "lmstudio"
    entries = listed.get("data") if isinstance(listed, dict) else None
    owners = {e.get("owned_by") for e in entries or () if isinstance(e, dict)}
    return next((kind for kind in ("llamacpp", "vllm") if kind in owners), None)


def _server_root(base_url: str, api_mode: str) -> str:
    """The server's own root: OpenAI-style base URLs end in the /v1 version path."""
    root = base_url.split("?", 1)[0].rstrip("/")
    if api_mode != "anthropic_messages" and root.endswith("/v1"):
        root = root[: -len("/v1")]
    return root


async def _ask(url: str, headers: dict[str, str], body: dict[str, Any] | None = None) -> Any:
    """The JSON answer to a GET (a POST of ``body``), or None for any failure: a server that
    is not this kind, a bad URL."""
    from talaria.providers.transport import http

    method = "GET" if body is None else "POST"
    try:
        return await http.json_answer(method, url, headers, body=body, seconds=PROBE_SECONDS)
    except Exception:
        return None


def _positive(value: Any) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _llama_props(props: Any) -> int | None:
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    per_slot = settings.get("n_ctx") if isinstance(settings, dict) else None
    return _positive(per_slot) or _positive(props.get("n_ctx"))


def _llama_slots(slots: Any) -> int | None:
    if isinstance(slots, list) and slots and isinstance(slots[0], dict):
        return _positive(slots[0].get("n_ctx"))
    return None


def _lmstudio(listing: Any, model: str) -> int | None:
    entries = listing.get("data") if isinstance(listing, dict) else None
    entry = _entry_for(entries, model)
    if entry is None:
        return None
    return _positive(entry.get("loaded_context_length")) or _positive(
        entry.get("max_context_length")
    )


def _ollama_num_ctx(show: Any) -> int | None:
    parameters = show.get("parameters") if isinstance(show, dict) else None
    if not isinstance(parameters, str):
        return None
    for line in parameters.splitlines():
        key, _, value = line.strip().partition(" ")
        if key == "num_ctx" and value.strip().isdigit():
            return _positive(int(value.strip()))
    return None


def _listed(listing: Any, model: str) -> int | None:
    entries = listing.get("data") if isinstance(listing, dict) else None
    entry = _entry_for(entries, model)
    return _window_of(entry) if entry is not None else None


def _entry_for(entries: Any, model: str) -> dict[str, Any] | None:
    """The entry for ``model``; a server listing one model is taken to serve it whatever name
    the user gave it (llama.cpp and single-model vLLM answer under any name)."""
    if not isinstance(entries, list):
        return None
    entry = next((e for e in entries if isinstance(e, dict) and e.get("id") == model), None)
    if entry is None and len(entries) == 1 and isinstance(entries[0], dict):
        entry = entries[0]
    return entry


def _window_of(entry: dict[str, Any]) -> int | None:
    for path in _METADATA_FIELDS:
        value: Any = entry
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if _positive(value):
            return int(value)
    return None
