"""What a session runs on (endpoint, model, API mode, toolsets, sandbox mode), stored with the
session so that `--resume` and `-c` continue on the same setup instead of asking for a model.

The record lives in the store's per-session state under "setup" (`set_state`), written after
each turn; the API key is never part of it. On resume, a flag given on the command line wins
over the stored value, and the chat says so.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from talaria.cli.options import agent_kwargs, configured_spec, resume_ref

if TYPE_CHECKING:
    from talaria.config import Config
    from talaria.store.base import SessionStore

SETUP_KEY = "setup"
ENDPOINT = ("provider", "base_url", "model", "api_mode")
"""Restored together: a new --provider or --base-url makes the stored endpoint meaningless."""
FLAGS = {
    "provider": "--provider",
    "base_url": "--base-url",
    "model": "--model",
    "api_mode": "--api-mode",
    "toolsets": "--toolsets",
    "sandbox": "--sandbox",
}


@dataclass
class ResumePlan:
    """The session `--resume`/`-c` names, and what restoring its setup said."""

    session_id: str | None = None
    notes: list[str] = field(default_factory=list)


def current_setup(
    args: argparse.Namespace, config: Config, overrides: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The setup a turn with these options runs on, resolved like the agent resolves it."""
    from talaria.providers.errors import ProviderError

    kwargs = {**agent_kwargs(args), **(overrides or {})}
    setup: dict[str, Any] = {}
    try:
        spec = configured_spec(kwargs, config)
    except (ProviderError, ValueError):
        spec = None
    if spec is not None:
        setup.update(
            provider=spec.provider, base_url=spec.base_url, model=spec.model, api_mode=spec.api_mode
        )
    if kwargs["toolsets"] is not None:
        setup["toolsets"] = list(kwargs["toolsets"])
    sandbox = getattr(args, "sandbox", None) or config.sandbox.mode
    if sandbox:
        setup["sandbox"] = sandbox
    return setup


def record_setup(store: SessionStore, session_id: str, setup: dict[str, Any]) -> None:
    if setup and store.get_state(session_id, SETUP_KEY) != setup:
        store.set_state(session_id, SETUP_KEY, setup)


def plan_resume(args: argparse.Namespace) -> ResumePlan:
    """Resolve --resume/-c (a reference that matches nothing raises `StoreError`) and fill the
    options the user did not give from the session's stored setup."""
    ref = resume_ref(args)
    if not ref:
        return ResumePlan()
    from talaria.cli.sessions import existing_store
    from talaria.store.base import SessionNotFound

    store = existing_store(getattr(args, "home", None))
    if store is None:
        raise SessionNotFound(f"no session matches {ref!r} (no sessions yet)")
    try:
        here = getattr(args, "continue_last", False) and newest_here(store)
        session_id = here or store.resolve(ref)
        stored = store.get_state(session_id, SETUP_KEY)
    finally:
        store.close()
    notes = apply_setup(args, stored if isinstance(stored, dict) else {})
    return ResumePlan(session_id, notes)


def newest_here(store: SessionStore) -> str | None:
    """`-c`: the most recent session started in the current directory (None: none was)."""
    from pathlib import Path

    sessions = store.list_sessions(limit=1, cwd=str(Path.cwd()))
    return sessions[0].id if sessions else None


def apply_setup(args: argparse.Namespace, stored: dict[str, Any]) -> list[str]:
    """Copy stored values into options left unset; one note per flag that overrides one."""
    given = {key: _given(args, key) for key in FLAGS}
    new_endpoint = given["provider"] is not None or given["base_url"] is not None
    notes: list[str] = []
    for key, flag in FLAGS.items():
        value = stored.get(key)
        if value is None:
            continue
        if given[key] is None:
            if not (new_endpoint and key in ENDPOINT):
                setattr(args, key, ",".join(value) if key == "toolsets" else value)
        elif given[key] != value:
            stored_value = (",".join(value) if key == "toolsets" else str(value)) or "''"
            notes.append(
                f"{flag} {_shown(args, key)} given on the command line wins over the "
                f"session's {stored_value}"
            )
    return notes


def _given(args: argparse.Namespace, key: str) -> Any:
    value = getattr(args, key, None)
    if key == "toolsets" and value is not None:
        return [name.strip() for name in str(value).split(",") if name.strip()]
    return value


def _shown(args: argparse.Namespace, key: str) -> str:
    value = getattr(args, key, None)
    return "''" if value == "" else str(value)
