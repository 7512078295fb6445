"""Plugins that break never hang or silence talaria: one that exits, fails to import, has a
syntax error or fails in `register()` is one warning naming it and the reason; a plugin tool
that exits (an argument parser's `sys.exit`) is a tool error, under `chat -q` and under
`talaria serve`; a plugin the config requires refuses to run when it does not load."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers import scripted_agent, tool_results
from server_helpers import ServeProcess
from talaria import ConfigError
from talaria.events import Notice
from talaria.testing import ScriptedProvider, call, text

pytestmark = pytest.mark.timeout(90)

TALARIA = str(Path(sys.executable).with_name("talaria"))

BROKEN = {
    "exits.py": "import sys\nsys.exit(4)\n",
    "missing.py": "import talaria_no_such_module_here\n",
    "syntax.py": "def register(bus)\n    pass\n",
    "raises.py": "def register(bus):\n    raise RuntimeError('no database for the guard')\n",
    "exits_in_register.py": "import sys\n\ndef register(bus):\n    sys.exit('not today')\n",
}
REASONS = {
    "exits.py": "import failed: it called sys.exit(4)",
    "missing.py": "import failed: No module named 'talaria_no_such_module_here'",
    "syntax.py": "import failed: syntax error at line 1: expected ':'",
    "raises.py": "register() failed: no database for the guard",
    "exits_in_register.py": "register() failed: it called sys.exit('not today')",
}

COUNT_PLUGIN = '''
import argparse

from talaria import tool


@tool
def count(spec: str) -> str:
    """Count to N, given as command-line options.

    Args:
        spec: options such as "--n 3"
    """
    parser = argparse.ArgumentParser(prog="count")
    parser.add_argument("--n", type=int, required=True)
    return " ".join(str(i) for i in range(1, parser.parse_args(spec.split()).n + 1))


def register(bus):
    bus.register_tool(count)
'''


def _home(path: Path, plugins: dict[str, str], config: str = "") -> Path:
    (path / "plugins").mkdir(parents=True)
    for name, source in plugins.items():
        (path / "plugins" / name).write_text(textwrap.dedent(source))
    (path / "config.yaml").write_text(
        "context:\n  engine: none\nmemory:\n  enabled: false\n" + config
    )
    return path


def _oneshot(home: Path, server: ScriptedProvider, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TALARIA_HOME": str(home)}
    command = [TALARIA, "chat", "-q", "go", "-m", "scripted-model", "--api-key", "k",
               "--base-url", server.openai_base_url, "--toolsets", "", *extra]  # fmt: skip
    return subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL
    )


def test_each_broken_plugin_is_one_notice_and_the_rest_still_load(tmp_path: Path) -> None:
    home = _home(tmp_path / "home", {**BROKEN, "works.py": COUNT_PLUGIN})
    script = [call("count", {"spec": "--n 3"}), text("counted")]
    with ScriptedProvider(script) as server:
        agent = scripted_agent(server, home, tools=[])
        notices: list[Notice] = []
        agent.subscribe(lambda event: notices.append(event) if isinstance(event, Notice) else None)
        result = agent.run_conversation("count to three")
    assert tool_results(result) == ["1 2 3"] and result["final_response"] == "counted"
    assert sorted(notice.message for notice in notices) == sorted(
        f"plugin {name} failed to load ({reason}); skipped" for name, reason in REASONS.items()
    )
    assert {notice.level for notice in notices} == {"warning"}


def test_chat_q_says_which_plugin_failed_and_why_and_answers(tmp_path: Path) -> None:
    home = _home(tmp_path / "home", {"exits.py": BROKEN["exits.py"]})
    with ScriptedProvider([text("still here")]) as server:
        done = _oneshot(home, server)
    assert (done.returncode, done.stdout) == (0, "still here\n"), done.stderr
    assert done.stderr.splitlines() == [
        "talaria: warning: plugin exits.py failed to load (import failed: it called "
        "sys.exit(4)); skipped"
    ]


def test_chat_q_survives_a_plugin_tool_whose_argument_parser_exits(tmp_path: Path) -> None:
    home = _home(tmp_path / "home", {"count.py": COUNT_PLUGIN})
    script = [call("count", {"spec": "--n ten"}), call("count", {"spec": "--n 2"}), text("1 2")]
    with ScriptedProvider(script) as server:
        done = _oneshot(home, server)
        sent = [m["content"] for m in server.requests[1].body["messages"] if m["role"] == "tool"]
    assert (done.returncode, done.stdout) == (0, "1 2\n"), done.stderr
    assert sent == [
        "Error: count tried to end the process (exit status 2); the call failed and nothing "
        "else was stopped."
    ]


@pytest.mark.parametrize(
    ("plugins", "config", "reason"),
    [
        ({"guard.py": BROKEN["raises.py"]}, "plugins:\n  required: [guard]\n",
         "plugin guard failed to load (register() failed: no database for the guard)"),
        ({"guard.py": BROKEN["exits.py"]}, "plugins:\n  required: [guard.py]\n",
         "plugin guard.py failed to load (import failed: it called sys.exit(4))"),
        ({}, "plugins:\n  required: [guard]\n", "plugin guard was not found"),
    ],
)  # fmt: skip
def test_a_required_plugin_that_does_not_load_refuses_to_run(
    tmp_path: Path, plugins: dict[str, str], config: str, reason: str
) -> None:
    home = _home(tmp_path / "home", plugins, config)
    with ScriptedProvider([text("ran unguarded")]) as server:
        done = _oneshot(home, server)
        assert server.requests == []
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"talaria: plugins.required: {reason}")
    assert "not running without it" in line


def test_a_required_plugin_that_loads_runs(tmp_path: Path) -> None:
    home = _home(tmp_path / "home", {"count.py": COUNT_PLUGIN}, "plugins:\n  required: [count]\n")
    with ScriptedProvider([text("guarded")]) as server:
        agent = scripted_agent(server, home, tools=[])
        assert agent.chat("hi") == "guarded"
        with pytest.raises(ConfigError, match=r"plugins\.required: plugin other was not found"):
            scripted_agent(server, home, tools=[], config={"plugins.required": ["other"]}).chat(
                "hi"
            )


def test_serve_survives_a_plugin_tool_that_exits_and_answers_the_next_request(
    tmp_path: Path,
) -> None:
    home = _home(tmp_path / "home", {"count.py": COUNT_PLUGIN})
    script = [call("count", {"spec": "--n ten"}), text("it failed"), text("second answer")]
    with ScriptedProvider(script) as server, ServeProcess(server, home) as serve:
        with serve.http() as client:
            body = {"model": "talaria", "messages": [{"role": "user", "content": "count"}]}
            first = client.post("/v1/chat/completions", json=body)
            assert first.status_code == 200, first.text
            assert first.json()["choices"][0]["message"]["content"] == "it failed"
            body["messages"][0]["content"] = "again"
            second = client.post("/v1/chat/completions", json=body)
            assert second.status_code == 200, second.text
            assert second.json()["choices"][0]["message"]["content"] == "second answer"
            assert client.get("/health").status_code == 200
        tool_messages = [
            m["content"] for m in server.requests[1].body["messages"] if m["role"] == "tool"
        ]
        assert serve.proc is not None and serve.proc.poll() is None
    assert tool_messages == [
        "Error: count tried to end the process (exit status 2); the call failed and nothing "
        "else was stopped."
    ]


def test_serve_warns_once_about_a_broken_plugin_however_many_requests_it_answers(
    tmp_path: Path,
) -> None:
    home = _home(tmp_path / "home", {"syntax.py": BROKEN["syntax.py"]})
    script = [text("one"), text("two"), text("three")]
    with (
        ScriptedProvider(script) as server,
        ServeProcess(server, home) as serve,
        serve.http() as client,
    ):
        for question in ("one", "two", "three"):
            body = {"model": "talaria", "messages": [{"role": "user", "content": question}]}
            answer = client.post("/v1/chat/completions", json=body)
            assert answer.json()["choices"][0]["message"]["content"] == question
    warnings = [
        line for line in (home / "serve.log").read_text().splitlines() if "syntax.py" in line
    ]
    assert warnings == [
        "talaria: warning: plugin syntax.py failed to load (import failed: syntax error at "
        "line 1: expected ':'); skipped"
    ]
