"""First run: when no model is configured, say how to point talaria at one, and offer the
OpenAI-compatible servers already running on this machine.

Detection is a parallel GET /v1/models on the usual local ports with a short timeout, using
the standard library only (the SDKs are not loaded just to look around).
"""

from __future__ import annotations

import argparse
import json
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from talaria.config import Config

KNOWN_SERVERS: tuple[tuple[str, int], ...] = (
    ("Ollama", 11434),
    ("llama.cpp", 8080),
    ("LM Studio", 1234),
    ("vLLM", 8000),
)
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY")


@dataclass(frozen=True, slots=True)
class LocalServer:
    name: str
    base_url: str
    models: list[str]


def list_models(base_url: str, timeout: float, api_key: str | None = None) -> list[str] | None:
    """The model ids an OpenAI-compatible server lists (None: no such server answered)."""
    import urllib.request

    request = urllib.request.Request(base_url.rstrip("/") + "/models")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            payload = json.loads(response.read(1_000_000))
    except (OSError, ValueError):
        return None
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        return None
    return [str(item["id"]) for item in data if isinstance(item, dict) and item.get("id")]


def detect_local_servers(
    candidates: Sequence[tuple[str, int]] = KNOWN_SERVERS,
    timeout: float = 0.3,
    host: str = "127.0.0.1",
) -> list[LocalServer]:
    """Servers that answered, in the order of `candidates`; all probes run at once."""
    found: dict[int, LocalServer] = {}

    def probe(index: int, name: str, port: int) -> None:
        base_url = f"http://{host}:{port}/v1"
        models = list_models(base_url, timeout)
        if models is not None:
            found[index] = LocalServer(name, base_url, models)

    threads = [
        threading.Thread(target=probe, args=(i, name, port), daemon=True)
        for i, (name, port) in enumerate(candidates)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout + 0.5)
    return [found[i] for i in sorted(found)]


def model_configured(args: argparse.Namespace, config: Config) -> bool:
    return bool(getattr(args, "model", None) or config.model.default)


def guidance(config_path: str, env: dict[str, str] | None = None) -> str:
    env = dict(os.environ) if env is None else env
    keys = [name for name in KEY_VARIABLES if env.get(name)]
    lines = [
        "talaria needs a model to talk to. Any of these works:",
        "  • a hosted API:   set OPENAI_API_KEY, ANTHROPIC_API_KEY or OPENROUTER_API_KEY",
        "                    then: talaria config set model.default <model>",
        "  • a local server: talaria chat --base-url http://127.0.0.1:8080/v1",
        "  • just this once: talaria chat -m <model> [--provider …] [--base-url …]",
        f"Settings live in {config_path}.",
    ]
    if keys:
        lines.insert(1, f"  ({', '.join(keys)} is set: only the model name is missing.)")
    return "\n".join(lines)


def server_choices(servers: list[LocalServer]) -> str:
    lines = [
        "Found a model server on this machine:"
        if len(servers) == 1
        else "Found model servers on this machine:"
    ]
    for number, server in enumerate(servers, 1):
        first = server.models[0] if server.models else "no models loaded"
        more = f" (+{len(server.models) - 1} more)" if len(server.models) > 1 else ""
        line = f"  {number}. {server.name:<10} {server.base_url:<27} {first}{more}"
        lines.append(line if len(line) < 80 else line[:78] + "…")
    return "\n".join(lines)


def offer_local_server(
    servers: list[LocalServer],
    ask: Callable[[str], str],
    say: Callable[[str], None],
) -> LocalServer | None:
    """Ask which detected server to use; None when the user declines."""
    usable = [server for server in servers if server.models]
    if not usable:
        return None
    say(server_choices(usable))
    prompt = "Use one? Type its number (saved to config.yaml), or press Enter to quit: "
    if len(usable) == 1:
        prompt = "Use it? [Y/n] (saved to config.yaml) "
    try:
        reply = ask(prompt).strip().lower()
    except EOFError:
        return None
    if len(usable) == 1:
        return usable[0] if reply in ("", "y", "yes", "1") else None
    if reply.isdigit() and 1 <= int(reply) <= len(usable):
        return usable[int(reply) - 1]
    return None


def ensure_model(
    args: argparse.Namespace,
    config: Config,
    ask: Callable[[str], str] = input,
    say: Callable[[str], None] = print,
    detect: Callable[[], list[LocalServer]] = detect_local_servers,
) -> bool:
    """Make sure `args` names a model; True when the chat can start.

    A base URL without a model takes the first model the server lists; nothing at all shows
    the guidance and offers a detected local server (saved to the config for next time).
    """
    if model_configured(args, config):
        return True
    base_url = args.base_url or config.model.base_url
    if base_url:
        models = list_models(base_url, timeout=3.0, api_key=args.api_key)
        if models:
            args.model = models[0]
            say(f"using model {models[0]} (the first one {base_url} lists)")
            return True
        say(f"talaria: {base_url} did not list any model; pass one with -m <model>")
        return False
    say(guidance(str(config.path)))
    servers = detect()
    chosen = offer_local_server(servers, ask, say)
    if chosen is None:
        if not servers:
            say("(no model server answered on the usual local ports)")
        return False
    from talaria.config_write import set_config_value

    path = config.path or config.home / "config.yaml"  # a Config not loaded from a file
    set_config_value(path, "model.base_url", chosen.base_url)
    set_config_value(path, "model.default", chosen.models[0])
    args.model, args.base_url = chosen.models[0], chosen.base_url
    say(f"saved to {path.name}: {chosen.models[0]} at {chosen.base_url}")
    return True
