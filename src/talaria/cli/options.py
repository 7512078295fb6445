"""Turns parsed command-line options into Agent arguments (shared by chat modes)."""

from __future__ import annotations

import argparse
from typing import Any


def agent_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {}
    if getattr(args, "yolo", False):
        config["approvals.mode"] = "off"
    if getattr(args, "sandbox", None):
        config["sandbox.mode"] = args.sandbox
    toolsets = None
    if getattr(args, "toolsets", None) is not None:
        toolsets = [name.strip() for name in args.toolsets.split(",") if name.strip()]
    return {
        "model": args.model,
        "provider": args.provider,
        "base_url": args.base_url,
        "api_key": args.api_key,
        "api_mode": args.api_mode,
        "toolsets": toolsets,
        "max_iterations": args.max_turns,
        "home": args.home,
        "stream": False if getattr(args, "no_stream", False) else None,
        "config": config,
        "source": "cli",
    }


def resume_ref(args: argparse.Namespace) -> str | None:
    if getattr(args, "continue_last", False):
        return "latest"
    return getattr(args, "resume", None)
