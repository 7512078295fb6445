"""The Starlette application: routes, middleware (host, CORS, origin, body limit, key), the page.

`create_app` takes the agent factory and the store, so tests and embedders can serve their own
agents; `talaria serve` builds both from the command line and the config. A server always has
a key: settings without one get a random one (`ServerSettings.ensure_key`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from talaria import __version__
from talaria.offload import run_blocking
from talaria.server import api_chat, api_responses, api_runs, api_sessions, openai_common
from talaria.server.errors import EXCEPTION_HANDLERS, ApiError, log
from talaria.server.guards import HostGuard, WriteGuard
from talaria.server.hub import AgentFactory, SessionHub
from talaria.server.middleware import BodyLimit, KeyAuth
from talaria.server.openai_common import SESSION_HEADER
from talaria.server.openapi import openapi_document
from talaria.server.settings import ServerSettings
from talaria.store.base import SessionStore

WEB_FILES = {
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
    "markdown.js": "text/javascript; charset=utf-8",
}


def _web(name: str) -> bytes:
    return resources.files("talaria.server").joinpath("web", name).read_bytes()


async def page(request: Request) -> Response:
    return Response(_web("index.html"), media_type="text/html; charset=utf-8")


async def asset(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in WEB_FILES:
        raise ApiError(404, f"no asset {name!r}")
    return Response(_web(name), media_type=WEB_FILES[name], headers={"Cache-Control": "no-cache"})


async def health(request: Request) -> Response:
    return JSONResponse({"status": "ok", "version": __version__})


async def openapi(request: Request) -> Response:
    return JSONResponse(openapi_document())


def _warm_up(make_agent: AgentFactory) -> None:
    """Import and assemble what a first turn needs (the SDKs, the tools) before the first
    request rather than during it; a failure here is left for that request to report."""
    try:
        agent = make_agent("warm-up")
        agent.warm_up()
        agent.close()
    except Exception:
        log.warning("warming up failed", exc_info=True)


def create_app(
    settings: ServerSettings, make_agent: AgentFactory, store: SessionStore
) -> Starlette:
    key = settings.ensure_key()
    hub = SessionHub(make_agent, store, settings)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await run_blocking(_warm_up, make_agent)
        yield
        await hub.aclose()

    routes = [
        Route("/", page, methods=["GET"]),
        Route("/assets/{name}", asset, methods=["GET"]),
        Route("/health", health, methods=["GET"]),
        Route("/openapi.json", openapi, methods=["GET"]),
        *openai_common.ROUTES,
        *api_chat.ROUTES,
        *api_responses.ROUTES,
        *api_runs.ROUTES,
        *api_sessions.ROUTES,
    ]
    middleware = [
        Middleware(HostGuard, allowed_hosts=settings.allowed_hosts),
        Middleware(
            CORSMiddleware,
            allow_origins=settings.allowed_origins,
            allow_methods=["GET", "POST", "PATCH", "DELETE"],
            allow_headers=["authorization", "content-type", "last-event-id", SESSION_HEADER],
            expose_headers=[SESSION_HEADER],
        ),
        Middleware(WriteGuard, allowed_origins=settings.allowed_origins),
        Middleware(BodyLimit, limit=settings.max_body_bytes),
        Middleware(KeyAuth, key=key),
    ]
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
    )
    app.state.hub = hub
    return app
