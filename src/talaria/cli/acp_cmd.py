"""`talaria acp`: serve the Agent Client Protocol on stdin/stdout.

Stdout is the wire, so before anything else runs, file descriptor 1 is pointed at stderr and
the protocol gets a private duplicate of the real stdout: a stray `print`, a plugin or a library
that writes to stdout lands in the editor's log instead of corrupting the JSON-RPC stream.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import importlib
import logging
import os
import sys
import threading
from typing import Any, BinaryIO, cast

from talaria.cli.main import EXIT_AGENT_FAILURE, EXIT_OK


def run_acp(args: argparse.Namespace) -> int:
    try:
        import acp  # noqa: F401
    except ImportError:
        print(
            "talaria: `talaria acp` needs the acp extra: pip install 'talaria[acp]'",
            file=sys.stderr,
        )
        return EXIT_AGENT_FAILURE
    wire = _take_stdout()
    logging.basicConfig(
        stream=sys.stderr,
        level=os.environ.get("TALARIA_LOG_LEVEL", "WARNING").upper(),
        format="talaria acp %(levelname)s %(name)s: %(message)s",
    )
    from talaria.config import ConfigError

    try:
        settings = _settings(args)
    except (ConfigError, ValueError) as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve(settings, wire))
    return EXIT_OK


def _take_stdout() -> BinaryIO:
    """The real stdout for the protocol alone; fd 1 (and so sys.stdout) now goes to stderr."""
    sys.stdout.flush()
    wire = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    return wire


def _settings(args: argparse.Namespace) -> Any:
    from talaria.acp.session import SessionSettings
    from talaria.agent_tools.catalog import Capabilities, default_toolsets
    from talaria.cli.options import agent_kwargs
    from talaria.config import Config
    from talaria.store.factory import configured_store

    kwargs = agent_kwargs(args)
    config = Config.load(kwargs["home"], overrides=kwargs["config"])
    toolsets = kwargs.pop("toolsets")
    if toolsets is None:
        caps = Capabilities(
            can_clarify=False,
            memory_enabled=bool(config.memory.enabled),
            can_delegate=True,
            web_enabled=bool(config.web.enabled),
        )
        toolsets = default_toolsets(caps)
    return SessionSettings(
        agent_kwargs=kwargs,
        toolsets=toolsets,
        images=config.model.vision is not False,
        mcp_servers=dict(config.mcp_servers or {}),
        open_store=functools.partial(configured_store, config),
    )


async def _serve(settings: Any, wire: BinaryIO) -> None:
    import acp

    from talaria.acp.framing import CheckedTransport
    from talaria.acp.server import TalariaAcpAgent
    from talaria.acp.wire import open_wire

    reader, writer = await open_wire(sys.stdin.buffer, wire)
    threading.Thread(target=_warm_imports, name="talaria-acp-warm", daemon=True).start()
    server = TalariaAcpAgent(settings)
    transport = CheckedTransport(reader, writer)
    try:  # session/close and session/resume are "unstable" in the SDK: serve them anyway
        await acp.run_agent(cast(acp.Agent, server), transport, use_unstable_protocol=True)
    finally:
        await server.close()


WARM_MODULES = ("talaria.assembly", "talaria.store.sqlite", "talaria.prompt.builder", "openai")


def _warm_imports() -> None:
    """Load what the first turn needs while the editor is still setting up (imports are
    thread-safe), so the first prompt does not pay for them."""
    for name in WARM_MODULES:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
