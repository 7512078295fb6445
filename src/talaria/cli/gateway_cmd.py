"""`talaria gateway` (connect the configured chat platforms and answer there until stopped)
and `talaria gateway pair CODE` (let in the user a pairing code was given to).

Refusals (no platform configured, a missing extra, an unknown code) are one line on stderr
and exit code 2. SIGTERM or Ctrl+C stops the running turns and exits 0; whatever answer was
recorded but not yet sent goes out at the next start.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import logging
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from talaria.config import Config

EXIT_REFUSED = 2


def add_gateway_parser(commands: Any, add_model_options: Callable[[Any], None]) -> None:
    gateway = commands.add_parser(
        "gateway", help="answer in chat platforms (Telegram, Slack, IRC, ...): docs/gateway.md"
    )
    actions = gateway.add_subparsers(dest="action")
    pair = actions.add_parser("pair", help="let in the user who was given a pairing code")
    pair.add_argument("code")
    pair.add_argument("--home")
    add_model_options(gateway)


def _fail(message: str) -> int:
    print(f"talaria gateway: {message}", file=sys.stderr)
    return EXIT_REFUSED


def run_gateway_command(args: argparse.Namespace) -> int:
    from talaria.config import Config
    from talaria.config_schema import ConfigError
    from talaria.store.base import StoreError
    from talaria.store.factory import configured_store

    try:
        config = Config.load(args.home)
        store = configured_store(config)
    except (ConfigError, StoreError) as exc:
        return _fail(str(exc))
    try:
        if args.action == "pair":
            return _pair(store, args.code, float(config.gateway.pairing_code_ttl))
        return _serve(args, config, store)
    finally:
        store.close()


def _pair(store: Any, code: str, ttl: float) -> int:
    from talaria.store.ledger import PairingExpired

    try:
        found = store.ledger_approve_pairing(code.strip().upper(), ttl=ttl)
    except PairingExpired:
        return _fail(f"the code {code!r} expired; ask the user to write again for a new one")
    if found is None:
        return _fail(f"no pairing request has the code {code!r} (unknown, or used already)")
    platform, user = found
    print(f"talaria gateway: paired {user} on {platform}; they can talk to the agent now")
    return 0


def _serve(args: argparse.Namespace, config: Config, store: Any) -> int:
    from talaria.config_schema import ConfigError
    from talaria.gateway.core import Gateway, load_platform
    from talaria.gateway.settings import all_platforms

    try:
        chosen = all_platforms(config.gateway.platforms)
        platforms = [(settings, load_platform(settings)) for settings in chosen]
    except (ConfigError, RuntimeError) as exc:
        return _fail(str(exc))
    gateway = Gateway(
        platforms,
        store,
        _agent_factory(args, store),
        edit_interval=float(config.gateway.edit_interval),
        compress_at=float(config.gateway.compress_at),
        pairing_code_ttl=float(config.gateway.pairing_code_ttl),
    )
    _log_to_stderr()
    asyncio.run(_run_until_stopped(gateway, [s.name for s in chosen]))
    return 0


def _agent_factory(
    args: argparse.Namespace, store: Any
) -> Callable[[str, str | None, tuple[str, ...]], Any]:
    from talaria.agent import Agent
    from talaria.cli.options import agent_kwargs

    base = agent_kwargs(args)
    base["source"] = "gateway"

    def make(session_id: str, model: str | None, notes: tuple[str, ...]) -> Agent:
        kwargs = copy.deepcopy(base)
        if model:
            kwargs["model"] = model
        return Agent(session_id=session_id, store=store, prompt_notes=notes, **kwargs)

    return make


def _log_to_stderr() -> None:
    """The gateway's own log (rate limits, retries, refused sends) on stderr, where a service
    manager keeps it."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger = logging.getLogger("talaria.gateway")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)


async def _run_until_stopped(gateway: Any, names: list[str]) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    await gateway.start()
    print(f"talaria gateway: connected {', '.join(names)}", file=sys.stderr, flush=True)
    try:
        await stop.wait()
    finally:
        await gateway.stop()
