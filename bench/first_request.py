"""Process start to first request: a fresh process that builds an agent and asks one thing,
timed from spawning it until the scripted server (own process) receives its first model
request; also until the process has exited with the answer, and the CPU the whole process
used (user + system, which a loaded machine inflates less than wall time).

Library: `python -c` with the side's own one-shot (talaria `Agent(...).chat`, hermes-agent
`AIAgent(...).chat`, pydantic-ai `Agent(...).run_sync`, the Agents SDK `Runner.run_sync`),
each in its own venv's interpreter. CLI: `talaria chat -q` against `hermes chat -q` (the
other peers have no chat command). The floor is one `httpx.post` from a bare interpreter;
the library's runs and the CLI's are two passes, each with the floor's runs interleaved in it
(a busy machine's load moves between passes, so each row is compared with its own floor).
Runs are interleaved across sides; medians. A first round is not counted, so that every side
starts as a user's second run does: bytecode written, files in the OS cache, and talaria's
user cache (prices, plugin scan; in a temporary TALARIA_CACHE_DIR) filled. Each run's user
message is unique, which is how the server's arrival times are matched to the run.

Variants: the endpoint over `http://` or `https://` (the scripted server with a self-signed
certificate, trusted through SSL_CERT_FILE by every side), each without and with a config file
in the talaria home. The peers run in the first variant only. `--baseline SRC` adds talaria
from another checkout's `src` folder as a column of its own (the same runs, interleaved), which
is how a start-up change is judged against the code before it.

Run: python bench/first_request.py [--reps 7] [--no-peers] [--variants http https ...]
     [--baseline ../other-checkout/src]
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import (
    AGENTS_SDK,
    HERMES,
    MODEL,
    PEERS,
    PYDANTIC_AI,
    TALARIA,
    ProviderProcess,
    Row,
    compile_talaria,
    median,
    report,
    unavailable,
)

from talaria.testing.tls import self_signed_certificate

LIBRARY: dict[str, str] = {
    TALARIA.key: (
        "from talaria import Agent\n"
        "Agent(model={model!r}, base_url={url!r}, api_key='x').chat({message!r})\n"
    ),
    HERMES.key: (
        "from run_agent import AIAgent\n"
        "AIAgent(base_url={url!r}, api_key='x', model={model!r}, quiet_mode=True)"
        ".chat({message!r})\n"
    ),
    PYDANTIC_AI.key: (
        "from pydantic_ai import Agent\n"
        "from pydantic_ai.models.openai import OpenAIChatModel\n"
        "from pydantic_ai.providers.openai import OpenAIProvider\n"
        "provider = OpenAIProvider(base_url={url!r}, api_key='x')\n"
        "Agent(OpenAIChatModel({model!r}, provider=provider)).run_sync({message!r})\n"
    ),
    AGENTS_SDK.key: (
        "from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled\n"
        "from openai import AsyncOpenAI\n"
        "set_tracing_disabled(True)\n"
        "model = OpenAIChatCompletionsModel({model!r}, AsyncOpenAI(base_url={url!r}, "
        "api_key='x'))\n"
        "Runner.run_sync(Agent(name='one', model=model), {message!r})\n"
    ),
}
FLOOR = (
    "import httpx\n"
    "httpx.post({url!r} + '/chat/completions', json={{'model': {model!r}, "
    "'messages': [{{'role': 'user', 'content': {message!r}}}]}})\n"
)

TALARIA_CONFIG = """\
agent: {max_iterations: 90, tool_timeout: 600}
approvals: {mode: manual, timeout: 300}
command_allowlist: ["git status"]
compression: {threshold: 0.5}
sandbox: {mode: workspace-write, network: false}
telemetry: {enabled: false}
"""
"""A config file as a user keeps one: it does not change the one-shot, its reading is timed."""

VARIANTS: dict[str, tuple[str, bool]] = {
    "http": ("http", False),
    "https": ("https", False),
    "http + config": ("http", True),
    "https + config": ("https", True),
}
"""name -> (the endpoint's scheme, whether the talaria home holds a config file)."""

BASELINE = "baseline"

HERMES_CONFIG = "model:\n  provider: custom\n  base_url: {url}\n  default: {model}\n  api_key: x\n"
"""`hermes chat -q` takes its endpoint from config (it ignores OPENAI_BASE_URL)."""

Command = Callable[[str, str], list[str]]
"""(base URL, user message) -> the argv of one fresh process."""


def library_command(python: Path, template: str) -> Command:
    return lambda url, message: [
        str(python),
        "-c",
        template.format(model=MODEL, url=url, message=message),
    ]


def talaria_cli(url: str, message: str) -> list[str]:
    return [
        str(Path(sys.executable).with_name("talaria")),
        "chat",
        "-q",
        message,
        "-m",
        MODEL,
        "--base-url",
        url,
        "--api-key",
        "x",
    ]


def hermes_cli(url: str, message: str) -> list[str]:
    return [str(HERMES.python.with_name("hermes")), "chat", "-q", message, "-Q"]


Figures = tuple[float, float, float]
"""Seconds to the first request, seconds to exit, CPU seconds of the whole process."""


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def one_run(
    provider: ProviderProcess, argv: list[str], message: str, env: dict[str, str], cwd: str
) -> Figures:
    """The figures of one fresh process."""
    cpu = _children_cpu()
    started = time.time()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=180)
    ended = time.time()
    cpu = _children_cpu() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed (rc={done.returncode}): {done.stderr.strip()[-600:]}")
    arrived = [when for key, when in provider.arrivals().items() if message in key]
    if not arrived:
        raise RuntimeError(f"{argv[0]} exited without a request reaching the server")
    return arrived[0] - started, ended - started, cpu


def measure(
    commands: dict[str, Command | str],
    runs: int,
    url: str,
    provider: ProviderProcess,
    extra_env: dict[str, str],
    config: bool = False,
    baseline: str | None = None,
) -> dict[str, Figures | str]:
    """Median figures per side, runs interleaved; a str command is the reason the side
    cannot run. The side `baseline` runs talaria from the `baseline` src folder."""
    samples: dict[str, list[Figures]] = {name: [] for name in commands}
    with tempfile.TemporaryDirectory(prefix="bench-first-") as home:
        for own in ("talaria", "hermes"):
            Path(home, own).mkdir()
        Path(home, "hermes", "config.yaml").write_text(HERMES_CONFIG.format(url=url, model=MODEL))
        if config:
            Path(home, "talaria", "config.yaml").write_text(TALARIA_CONFIG)
        env = {
            **os.environ,
            "TALARIA_HOME": f"{home}/talaria",
            "TALARIA_CACHE_DIR": f"{home}/cache",
            "HERMES_HOME": f"{home}/hermes",
            "OPENAI_BASE_URL": url,
            "OPENAI_API_KEY": "x",
            **extra_env,
        }
        env.pop("PYTHONPATH", None)
        envs = {name: env for name in commands}
        if baseline is not None:
            envs[BASELINE] = {**env, "PYTHONPATH": baseline, "TALARIA_CACHE_DIR": f"{home}/cache2"}
        for index in range(-1, runs):  # round -1 is not counted: every side starts warm
            for name, command in commands.items():
                if isinstance(command, str):
                    continue
                message = f"first-request {name} {index}"
                figures = one_run(provider, command(url, message), message, envs[name], home)
                if index >= 0:
                    samples[name].append(figures)
    return {
        name: command
        if isinstance(command, str)
        else (
            median([s[0] for s in samples[name]]),
            median([s[1] for s in samples[name]]),
            median([s[2] for s in samples[name]]),
        )
        for name, command in commands.items()
    }


def _library_commands(peers: bool, baseline: str | None = None) -> dict[str, Command | str]:
    commands: dict[str, Command | str] = {
        TALARIA.key: library_command(TALARIA.python, LIBRARY[TALARIA.key])
    }
    if baseline is not None:
        commands[BASELINE] = library_command(TALARIA.python, LIBRARY[TALARIA.key])
    for side in PEERS:
        reason = unavailable(side) if peers else "skipped"
        commands[side.key] = reason or library_command(side.python, LIBRARY[side.key])
    commands["floor"] = library_command(TALARIA.python, FLOOR)
    return commands


def run(
    reps: int = 7,
    peers: bool = True,
    variants: tuple[str, ...] = tuple(VARIANTS),
    baseline: str | None = None,
) -> list[Row]:
    """Rows for each variant; the plain `http` variant's rows keep their plain names (run_all's
    targets read them), the others' start with the variant's name."""
    notes: dict[str, Any] = {"runs": reps, "statistic": "median, runs interleaved"}
    if baseline is not None:
        notes["baseline"] = f"talaria from {baseline}"
    compile_talaria()
    if baseline is not None:
        compileall.compile_dir(baseline, quiet=1)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as keys:
        for number, name in enumerate(variants):
            scheme, config = VARIANTS[name]
            tls = self_signed_certificate(Path(keys)) if scheme == "https" else None
            extra_env = {"SSL_CERT_FILE": str(tls[0])} if tls else {}
            with_peers = peers and number == 0
            library = _library_commands(with_peers, baseline)
            cli: dict[str, Command | str] = {
                TALARIA.key: talaria_cli,
                HERMES.key: (unavailable(HERMES) or hermes_cli) if with_peers else "skipped",
                "floor": library["floor"],
            }
            if baseline is not None:
                cli[BASELINE] = talaria_cli
            with ProviderProcess([], tls=tls) as provider:
                lib = measure(library, reps, provider.url, provider, extra_env, config, baseline)
                chat = measure(cli, reps, provider.url, provider, extra_env, config, baseline)
            for side, value in {**lib, **chat}.items():
                if isinstance(value, str) and number == 0:
                    notes[side] = value
            prefix = "" if name == "http" else f"{name}: "
            rows += [
                _row(f"{prefix}library: process start to first request", lib, 0),
                _row(f"{prefix}library: process start to exit (one answer)", lib, 1),
                _row(f"{prefix}library: CPU of the whole process", lib, 2),
                _row(f"{prefix}`chat -q`: process start to first request", chat, 0),
                _row(f"{prefix}`chat -q`: process start to exit (one answer)", chat, 1),
                _row(f"{prefix}`chat -q`: CPU of the whole process", chat, 2),
            ]
    notes["variants"] = ", ".join(variants) + " (peers in the first only)"
    report("first_request", "Process start to first request (fresh process each run)", rows, notes)
    return rows


def _row(metric: str, figures: dict[str, Figures | str], index: int) -> Row:
    def cell(key: str) -> float | str | None:
        if key not in figures:
            return "no CLI" if key != "floor" else None
        value = figures[key]
        return value if isinstance(value, str) else value[index]

    peers = {side.label: cell(side.key) for side in PEERS[1:]}
    if BASELINE in figures:
        peers[BASELINE] = cell(BASELINE)
    return Row(metric, cell(TALARIA.key), cell(HERMES.key), cell("floor"), "s", peers)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--no-peers", action="store_true")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), default=list(VARIANTS))
    parser.add_argument("--baseline", help="the src folder of another talaria checkout")
    args = parser.parse_args()
    baseline = str(Path(args.baseline).resolve()) if args.baseline else None
    if baseline and not Path(baseline, "talaria", "__init__.py").is_file():
        parser.error(f"--baseline {args.baseline}: no talaria package in that folder")
    run(args.reps, peers=not args.no_peers, variants=tuple(args.variants), baseline=baseline)


if __name__ == "__main__":
    main()
