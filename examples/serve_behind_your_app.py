"""talaria's HTTP server inside your own web app: your routes at `/`, the agent's API
(OpenAI-compatible endpoints, runs with server-sent events, sessions) under `/agent`.

Needs `pip install 'talaria[server]'`. The agent's routes keep their own key check; this script
starts the app on a free port, asks the agent one question through its Chat Completions
endpoint, and stops.

    python examples/serve_behind_your_app.py
"""

from __future__ import annotations

import json
import socket
import tempfile
import threading
import time
import urllib.request

import uvicorn
from endpoint import endpoint
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route

from talaria import Agent
from talaria.server.app import create_app
from talaria.server.settings import ServerSettings
from talaria.store.sqlite import SQLiteSessionStore

KEY = "example-key-please-change"


async def home(request: Request) -> PlainTextResponse:
    return PlainTextResponse("my app; the agent is under /agent")


def build_app(folder: str) -> Starlette:
    store = SQLiteSessionStore(f"{folder}/sessions.db")

    def make_agent(session_id: str) -> Agent:
        return Agent(**endpoint(), session_id=session_id, store=store, home=folder, tools=[])

    agent_app = create_app(ServerSettings(api_key=KEY), make_agent, store)
    return Starlette(routes=[Route("/", home), Mount("/agent", app=agent_app)])


def ask(port: int, question: str) -> str:
    body = {"model": "talaria", "messages": [{"role": "user", "content": question}]}
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/agent/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=120) as answer:
        reply: str = json.load(answer)["choices"][0]["message"]["content"]
    return reply


with tempfile.TemporaryDirectory() as folder:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(build_app(folder), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        print("agent:", ask(port, "Say hello to the app."))
    finally:
        server.should_exit = True
        thread.join(timeout=30)
