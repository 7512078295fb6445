"""Side calls: model requests the agent makes for itself (summaries, titles, vision, search).

Each task may name its own, usually cheaper, model under ``auxiliary.<task>`` in the config
(``model``, ``provider``, ``base_url``, ``api_key``, ``api_mode``, and a ``fallback`` list of
the same shape). Whatever is configured, the main model is the last resort, so a side task
never fails just because its dedicated model is down. Side calls are tool-free and
non-streaming; their usage is priced and counted in the turn that caused them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from talaria.core import Message, ModelClient, ModelRequest, ModelResponse
from talaria.events import Notice
from talaria.providers.base import NullStream
from talaria.providers.errors import ProviderError

if TYPE_CHECKING:
    from talaria.loop.runtime import Runtime
    from talaria.providers.factory import ProviderSpec

log = logging.getLogger("talaria.auxiliary")

_SPEC_KEYS = ("model", "provider", "base_url", "api_key", "api_mode")


async def side_call(
    rt: Runtime, task: str, messages: list[Message], *, max_tokens: int = 2048
) -> ModelResponse:
    """Ask the task's model (then its fallbacks, then the main model) and return the first
    answer, counted in the turn. Raises the last `ProviderError` when every candidate
    failed, and `Interrupted` when the turn is interrupted meanwhile."""
    client, response = await side_answer(rt, task, messages, max_tokens=max_tokens)
    rt.add_side_usage(response.usage, client.model, client.provider)
    return response


async def side_answer(
    rt: Runtime, task: str, messages: list[Message], *, max_tokens: int = 2048
) -> tuple[ModelClient, ModelResponse]:
    """`side_call` without counting: the priced answer and the client that gave it, for a
    caller that counts it elsewhere (a durable turn's summary, asked on a worker)."""
    request = ModelRequest(messages=messages, max_tokens=max_tokens, stream=False)
    last_error: ProviderError | None = None
    for label, client, owned in _candidates(rt, task):
        try:
            with rt.telemetry.model_call(request, client) as observed:
                response = await rt.interrupt.race(client.complete(request, NullStream()))
                observed.answered(client, response)
        except ProviderError as error:
            last_error = error
            log.warning("auxiliary %s call on %s failed: %s", task, label, error)
            rt.emit(
                Notice(
                    "warning",
                    f"{task} model {label} failed ({error.kind.value}); trying the next one",
                )
            )
            continue
        finally:
            if owned:
                await client.aclose()
        _price(client, response)
        return client, response
    assert last_error is not None  # the main model is always a candidate
    raise last_error


def _candidates(rt: Runtime, task: str) -> Iterator[tuple[str, ModelClient, bool]]:
    """(label, client, whether we built it and must close it), in the order to try them.

    A spec that cannot be resolved (say, a missing key) is skipped with a warning, like a
    model that fails: the main model still answers.
    """
    settings = rt.config.get(f"auxiliary.{task}") or {}
    configured = [settings] if any(settings.get(key) for key in _SPEC_KEYS) else []
    configured += [entry for entry in settings.get("fallback") or () if isinstance(entry, dict)]
    for entry in configured:
        try:
            spec = _spec(rt, entry)
        except (ProviderError, ValueError) as error:
            log.warning("auxiliary %s model is not usable: %s", task, error)
            continue
        from talaria.providers.factory import build_client

        yield spec.label, build_client(spec), True
    main = rt.caller.chain.active
    yield main.label, main.client(), False


def _spec(rt: Runtime, entry: dict[str, Any]) -> ProviderSpec:
    """An auxiliary entry as a full spec. An entry that names only a model (or a mode) runs
    on the main model's endpoint with the main model's credentials."""
    from talaria.providers.factory import resolve_spec

    main = rt.caller.chain.active.spec
    if main is not None and not entry.get("provider") and not entry.get("base_url"):
        return resolve_spec(
            model=entry.get("model") or main.model,
            provider=main.provider,
            base_url=main.base_url,
            api_key=entry.get("api_key") or main.api_key,
            api_mode=entry.get("api_mode") or main.api_mode,
            profiles=rt.config.profiles,
        )
    return resolve_spec(
        model=entry.get("model") or (main.model if main else None),
        provider=entry.get("provider"),
        base_url=entry.get("base_url"),
        api_key=entry.get("api_key"),
        api_mode=entry.get("api_mode"),
        profiles=rt.config.profiles,
    )


def _price(client: ModelClient, response: ModelResponse) -> None:
    from talaria.providers.pricing import estimate_cost
    from talaria.providers.profiles import profile_of

    response.usage.estimated_cost_usd = estimate_cost(
        client.model, response.usage, client.provider, profile_of(client)
    )
