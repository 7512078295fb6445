"""What a process has loaded when its first model request goes out: only what that request
needs. Checked by module (not by time) in a fresh interpreter, through the library and through
`talaria chat -q`, with the scripted provider in the same process noting `sys.modules` the
moment the request arrives (the endpoint's context-window probe, on a loopback server, goes
first and is part of what is checked).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import SRC, run_python
from talaria.testing import Fail, Script, ScriptedProvider, text

NOT_BEFORE_THE_FIRST_REQUEST = (
    # the terminal UI (the chat's, never a one-shot's)
    "rich",
    "prompt_toolkit",
    "pygments",
    "click",
    # the price catalogue: a turn's cost is asked after its first answer
    "genai_prices",
    # the official SDKs are test oracles, not the runtime path (nor their pydantic types)
    "openai",
    "anthropic",
    "pydantic",
    # any HTTP library: a plain http:// endpoint goes through talaria's own HTTP/1.1 client
    # (the transport and the window probe share it; httpx2 is for https and proxies)
    "httpx",
    "httpx2",
    "httpcore2",
    "h11",
    "h2",
    "anyio",
    # optional extras, imported only when used
    "mcp",
    "acp",
    "starlette",
    "uvicorn",
    "temporalio",
    "psycopg",
    "opentelemetry",
)

NOT_BEFORE_THE_FIRST_REQUEST_MODULES = (
    # a memory write's injection and secret scan, with its regexes
    "talaria.prompt.injection",
    # a session search's query parser
    "talaria.store.query",
    # the plugin scan reads entry_points.txt itself
    "importlib.metadata",
    "zipfile",
    "csv",
    # what later steps need: a background process (ctypes), random ids (os.urandom does),
    # orjson (it loads uuid; talaria.fastjson waits for the first answer)
    "ctypes",
    "uuid",
    "orjson",
    # what the first command needs: whether bubblewrap works here
    "talaria.tools.sandbox_probe",
    # the toolsets an agent does not offer by default (web and browser reach outside the
    # machine, execute_code is chosen by name): their modules load only when chosen
    "talaria.tools.web",
    "talaria.tools.browser",
    "talaria.tools.builtin.code",
    # other commands' parts of the command line (a one-shot builds only `chat`'s)
    "talaria.cli.mcp_cmd",
    "talaria.cli.durable_cmd",
)

PROBE = """
import dataclasses, json, sys
from talaria.testing import Script, ScriptedProvider, text

seen = []


def undocumented():
    found = []
    for name, module in list(sys.modules.items()):
        # not the scripted server's classes, nor the HTTP transport's (it is being rewritten)
        if not name.startswith("talaria.") or name.startswith(
                ("talaria.testing", "talaria.providers.transport")):
            continue
        for value in list(vars(module).values()):
            if (isinstance(value, type) and value.__module__ == name
                    and dataclasses.is_dataclass(value)
                    and (value.__doc__ or "").startswith(value.__name__ + "(")):
                found.append(name + "." + value.__name__)
    return sorted(found)


def answer(body):
    if not seen:
        seen.append({{"modules": sorted(sys.modules), "undocumented": undocumented()}})
    return text("hi")


with ScriptedProvider(script=Script(fallback=answer), strict=False) as server:
    url = server.openai_base_url
{body}
print(json.dumps(seen[0]))
"""

LIBRARY = """
    from talaria import Agent

    agent = Agent(model="scripted-model", base_url=url, api_key="k", home=sys.argv[1],
                  cwd=sys.argv[1])
    assert agent.chat("hello") == "hi"
"""

ONE_SHOT = """
    from talaria.cli.main import main

    try:
        main(["chat", "-q", "hello", "-m", "scripted-model", "--base-url", url, "--api-key", "k"])
    except SystemExit as done:
        assert not done.code, done.code
"""


def loaded_at_first_request(body: str, home: Path) -> set[str]:
    """The modules loaded when the first request reached the scripted server."""
    return set(probe_first_request(body, home)["modules"])


def probe_first_request(body: str, home: Path) -> dict[str, list[str]]:
    """What the process held when the first request reached the scripted server: its
    modules, and talaria's dataclasses without a docstring of their own."""
    printed = run_python(PROBE.format(body=body), str(home), cwd=home, home=home)
    seen: dict[str, list[str]] = json.loads(printed.strip().splitlines()[-1])
    return seen


def test_the_library_sends_its_first_request_before_loading_what_it_does_not_need(
    tmp_path: Path,
) -> None:
    loaded = loaded_at_first_request(LIBRARY, tmp_path)
    assert "talaria.loop.turn" in loaded and "sqlite3" in loaded  # the probe saw a real turn
    assert not_needed_yet(loaded) == []


def test_a_one_shot_sends_its_first_request_before_loading_the_terminal_ui(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.yaml").write_text("agent:\n  max_turns: 20\n")
    loaded = loaded_at_first_request(ONE_SHOT, tmp_path)
    assert "talaria.cli.oneshot" in loaded and "yaml" in loaded  # it read the config file
    assert not_needed_yet(loaded) == []


def not_needed_yet(loaded: set[str]) -> list[str]:
    """What of `loaded` the first request does not need (packages by their top level)."""
    packages = {name.split(".")[0] for name in loaded}
    return sorted(
        (packages & set(NOT_BEFORE_THE_FIRST_REQUEST))
        | (loaded & set(NOT_BEFORE_THE_FIRST_REQUEST_MODULES))
    )


def test_the_dataclasses_loaded_before_the_first_request_have_docstrings(tmp_path: Path) -> None:
    """Without one, `dataclasses` builds a docstring from `inspect.signature` at import."""
    assert probe_first_request(LIBRARY, tmp_path)["undocumented"] == []


def test_finding_installed_plugins_does_not_load_importlib_metadata(tmp_path: Path) -> None:
    """The entry-point scan reads the distributions' entry_points.txt itself."""
    probe = (
        "import sys\n"
        "from pathlib import Path\n"
        "from talaria.plugins.hooks import HookBus\n"
        "from talaria.plugins.loader import load_plugins\n"
        "load_plugins(HookBus(), Path(sys.argv[1]))\n"
        "print(sorted(name for name in sys.modules if name.startswith(('importlib.metadata', "
        "'email', 'zipfile', 'csv'))))\n"
    )
    assert run_python(probe, str(tmp_path), cwd=tmp_path).strip() == "[]"


@pytest.mark.parametrize(
    ("model", "provider", "cost"),
    [("scripted-model", None, None), ("gpt-4o-mini", "openai", 0.0), ("llama3", "ollama", 0.0)],
)
def test_a_turn_that_fails_before_any_answer_still_reports_its_cost(
    tmp_path: Path, model: str, provider: str | None, cost: float | None
) -> None:
    """Unpriced model: unknown (None); priced or local model: nothing spent (0.0)."""
    from talaria import Agent

    with ScriptedProvider([Fail(400, "bad request")], model=model) as server:
        agent = Agent(
            model=model,
            provider=provider,
            base_url=server.openai_base_url,
            api_key="k",
            home=tmp_path,
            cwd=tmp_path,
            toolsets=[],
            config={"model.context_length": 128000},
        )
        with agent:
            result = agent.run_conversation("hello")
    assert result["turn_exit_reason"].startswith("failed:")
    assert result["api_calls"] == 1
    assert result["usage"]["estimated_cost_usd"] == cost
    assert result["usage"]["total_tokens"] == 0


STDLIB_NOT_BEFORE_THE_FIRST_REQUEST = (
    # the standard library's heavier parts a first request does without: a Retry-After date
    # (email.utils), the platform's name (os.uname says it), another HTTP stack
    "email",
    "platform",
    "http",
    "urllib.request",
    "shutil",
    "random",
)

SNAPSHOT_ON_SIGNAL = """
import os, signal, sys

def snapshot(number, frame):
    # listed first, then the file appears whole: the server answers once it exists, and the
    # answer's own imports (on the agent's loop thread) must not slip into the list
    names = "\\n".join(sorted(sys.modules))
    with open(sys.argv[2] + ".part", "w") as out:
        out.write(names)
    os.replace(sys.argv[2] + ".part", sys.argv[2])

signal.signal(signal.SIGUSR1, snapshot)
from talaria import Agent

agent = Agent(model="scripted-model", base_url=sys.argv[1], api_key="k", home=sys.argv[3],
              cwd=sys.argv[3])
assert agent.chat("hello") == "hi"
"""


def test_a_process_of_its_own_loads_no_more_of_the_standard_library_than_it_needs(
    tmp_path: Path,
) -> None:
    """Here nothing else lives in the agent's process: the scripted server runs in the test's,
    and signals the agent's process to write down its modules when the first request comes."""
    listing = tmp_path / "modules.txt"
    child: list[subprocess.Popen[str]] = []

    def answer(body: dict[str, object]) -> object:
        if not listing.exists():
            child[0].send_signal(signal.SIGUSR1)
            deadline = time.monotonic() + 30
            while not listing.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        return text("hi")

    with ScriptedProvider(script=Script(fallback=answer), strict=False) as server:
        env = {**os.environ, "PYTHONPATH": str(SRC), "TALARIA_HOME": str(tmp_path)}
        argv = [server.openai_base_url, str(listing), str(tmp_path)]
        child.append(
            subprocess.Popen(
                [sys.executable, "-c", SNAPSHOT_ON_SIGNAL, *argv],
                env=env,
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
        _, err = child[0].communicate(timeout=120)
    assert child[0].returncode == 0, err[-2000:]
    loaded = set(listing.read_text().split())
    assert "talaria.loop.turn" in loaded and "sqlite3" in loaded  # it saw a real turn
    assert not_needed_yet(loaded) == []
    packages = {name.split(".")[0] for name in loaded}
    stdlib = sorted(
        name
        for name in STDLIB_NOT_BEFORE_THE_FIRST_REQUEST
        if name in loaded or ("." not in name and name in packages)
    )
    assert stdlib == []
