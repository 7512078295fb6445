"""`talaria serve`: check the settings, bind the port, run uvicorn with the app.

Refusals (an open address without a strong key, a port in use, the extra not installed) are
one line on stderr and exit code 2, before anything listens. Without a configured key the
server makes one for this launch and prints the page's address with it (`/?token=<key>`, as
Jupyter does): the page keeps it, so nobody types it, and no other web page can know it.
"""

from __future__ import annotations

import argparse
import copy
import socket
import sys
from typing import Any

from talaria.server.settings import ServerSettings

EXIT_REFUSED = 2


def _fail(message: str) -> int:
    print(f"talaria serve: {message}", file=sys.stderr)
    return EXIT_REFUSED


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(2048)  # connections queue while the app warms up
    return sock


def agent_factory(args: argparse.Namespace, store: Any, settings: ServerSettings) -> Any:
    """One Agent per session, all on the server's model, tools and store."""
    from talaria.agent import Agent
    from talaria.cli.options import agent_kwargs

    base = agent_kwargs(args)
    base["source"] = "server"
    if settings.approvals == "off":
        base["config"]["approvals.mode"] = "off"

    def make(session_id: str) -> Agent:
        kwargs = copy.deepcopy(base)
        return Agent(session_id=session_id, store=store, **kwargs)

    return make


def _uvicorn_config(app: Any, settings: ServerSettings) -> Any:
    import uvicorn

    from talaria.server.protocol import with_head_deadline

    return uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        http=with_head_deadline(settings.header_timeout_s),
        timeout_keep_alive=settings.keep_alive_s,
        limit_concurrency=settings.max_connections,
        timeout_graceful_shutdown=STOP_DEADLINE,
    )


STOP_DEADLINE = 1
"""Seconds uvicorn waits, once the runs have ended, for the last responses to be sent."""


def graceful_server(config: Any, hub: Any) -> Any:
    """uvicorn's server, made to end the runs before it waits for open connections: an event
    stream lasts as long as its run, so on SIGTERM uvicorn would otherwise wait for every
    followed turn to finish (minutes) before it exits."""
    import uvicorn

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: Any = None) -> None:
            await hub.end_runs()
            await super().shutdown(sockets)

    return Server(config)


def run_serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn  # noqa: F401 - the server extra is installed

        from talaria.server.app import create_app
    except ImportError as exc:
        return _fail(
            f"needs the server extra ({exc.name} is missing): pip install 'talaria[server]'"
        )
    from talaria.config import Config, ConfigError
    from talaria.store.base import StoreError
    from talaria.store.factory import check_writable, configured_store

    try:
        config = Config.load(args.home)
    except ConfigError as exc:
        return _fail(str(exc))
    settings = ServerSettings.from_config(config, host=args.host, port=args.port)
    refusal = settings.refusal()
    if refusal:
        return _fail(refusal)
    try:
        sock = _bind(settings.host, settings.port)
    except OSError as exc:
        return _fail(f"cannot listen on {settings.host}:{settings.port}: {exc.strerror or exc}")
    try:
        store = configured_store(config)
        check_writable(store)
    except StoreError as exc:
        sock.close()
        return _fail(str(exc))
    configured = bool(settings.api_key)
    app = create_app(settings, agent_factory(args, store, settings), store)
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    address = f"http://{shown}:{port}"
    token = "<your server key>" if configured else settings.ensure_key()
    print(f"talaria serve: listening on {address}", file=sys.stderr)
    print(f"talaria serve: web page: {address}/?token={token}", file=sys.stderr, flush=True)
    server = graceful_server(_uvicorn_config(app, settings), app.state.hub)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        store.close()
    return 0
