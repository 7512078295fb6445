"""Serve a bench plan (see common.Plan) from talaria's ScriptedProvider until stdin closes.

The plan "echo" answers each turn with its user message (bench/gateway.py). Prints the OpenAI
base URL on the first line; on exit prints request statistics as JSON. Runs
in its own process so the server never competes with the measured agent for the GIL.
The line `arrivals` on stdin is answered with one JSON line: for each first user message seen
since the last such line, the wall-clock time (time.time()) its first request arrived, which
is how a bench times a fresh process from its start to its first request.
With a certificate and key after the plan and the delay, it serves `https://`.
Validation is off (strict=False): the bench measures speed, and the scripted server's strict
checks reject fields the reference sends (e.g. `name` on tool messages).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from typing import Any

from talaria.testing import Script, ScriptedProvider, calls, text
from talaria.testing.script import Step


def echo(body: dict[str, Any], delay: float = 0.0) -> Step:
    """The plan "echo": answer each turn with its user message, as `echo: <message>` (the
    message ends the turn's last user message, whatever a front end put before it)."""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    said = str(users[-1].get("content")) if users else ""
    return text(f"echo: {said.splitlines()[-1] if said else ''}", delay=delay)


def step_for(plan: list[list[list[Any]]], body: dict[str, Any], delay: float = 0.0) -> Step:
    """The plan step this request is at: assistant messages since the last user message.

    A user message "steps=<k>" cuts the turn to k model calls (k - 1 tool steps, then text),
    so one server can time turns of several lengths.
    """
    messages = body.get("messages") or []
    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    done = sum(1 for m in messages[last_user + 1 :] if m.get("role") == "assistant")
    asked = re.search(r"steps=(\d+)", json.dumps(messages[last_user])) if last_user >= 0 else None
    if asked:
        plan = plan[: int(asked.group(1)) - 1]
    if done < len(plan):
        return calls(*[(name, args) for name, args in plan[done]], delay=delay)
    return text("done", delay=delay)


class Arrivals:
    """When each turn's first request arrived, by the turn's first user message."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._first: dict[str, float] = {}

    def record(self, body: dict[str, Any]) -> None:
        now = time.time()
        users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
        key = json.dumps(users[0].get("content")) if users else ""
        with self._lock:
            self._first.setdefault(key, now)

    def take(self) -> dict[str, float]:
        with self._lock:
            taken, self._first = self._first, {}
        return taken


def main() -> None:
    plan = json.loads(sys.argv[1])
    delay = float(sys.argv[2]) if len(sys.argv) > 2 else 0.0  # seconds before each answer
    arrivals = Arrivals()

    def answer(body: dict[str, Any]) -> Step:
        arrivals.record(body)
        return echo(body, delay) if plan == "echo" else step_for(plan, body, delay)

    tls = None
    if len(sys.argv) > 4:  # a certificate and its key: serve https://
        import ssl

        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(sys.argv[3], sys.argv[4])
    provider = ScriptedProvider(script=Script(fallback=answer), strict=False, ssl_context=tls)
    with provider:
        print(provider.openai_base_url, flush=True)
        for line in sys.stdin:
            if line.strip() == "arrivals":
                print(json.dumps(arrivals.take()), flush=True)
        requests = list(provider.requests)
    print(json.dumps({"requests": len(requests)}), flush=True)


if __name__ == "__main__":
    main()
