"""Turns parsed command-line options into Agent arguments (shared by chat modes)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from talaria.config import Config
    from talaria.providers.factory import ProviderSpec


def agent_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Agent(**...) for the options given; a bad --base-url is a one-line `ConfigError`."""
    if getattr(args, "base_url", None):
        from talaria.config_schema import check_value

        check_value("model.base_url", args.base_url, "--base-url")
    config: dict[str, Any] = {}
    if getattr(args, "yolo", False):
        config["approvals.mode"] = "off"
    if getattr(args, "lean", False):
        config["prompt.profile"] = "lean"
    if getattr(args, "sandbox", None):
        config["sandbox.mode"] = args.sandbox
    toolsets = None
    if getattr(args, "toolsets", None) is not None:
        toolsets = [name.strip() for name in args.toolsets.split(",") if name.strip()]
    kwargs: dict[str, Any] = {
        "model": getattr(args, "model", None),
        "provider": getattr(args, "provider", None),
        "base_url": getattr(args, "base_url", None),
        "api_key": getattr(args, "api_key", None),
        "api_mode": getattr(args, "api_mode", None),
        "toolsets": toolsets,
        "max_iterations": getattr(args, "max_turns", None),
        "home": getattr(args, "home", None),
        "stream": False if getattr(args, "no_stream", False) else None,
        "config": config,
        "source": "cli",
    }
    if getattr(args, "skill", None):
        kwargs["skills"] = list(args.skill)
    return kwargs


def resume_ref(args: argparse.Namespace) -> str | None:
    if getattr(args, "continue_last", False):
        return "latest"
    return getattr(args, "resume", None)


def configured_spec(kwargs: dict[str, Any], config: Config) -> ProviderSpec:
    """The endpoint Agent(**kwargs) would resolve to, arguments over config (raises
    `ProviderError` or `ValueError` when it cannot be resolved)."""
    from talaria.providers.factory import resolve_spec

    return resolve_spec(
        model=kwargs.get("model") or config.model.default,
        provider=kwargs.get("provider") or config.model.provider,
        base_url=kwargs.get("base_url") or config.model.base_url,
        api_key=kwargs.get("api_key") or config.model.api_key,
        api_mode=kwargs.get("api_mode") or config.model.api_mode,
    )
