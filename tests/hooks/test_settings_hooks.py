"""Hooks in Claude Code's settings shape: real commands (JSON on stdin, exit 2 blocks with
stderr as the reason, JSON on stdout decides) and a real HTTP endpoint, from the home's
settings and, once trusted, the project's."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from helpers import scripted_agent, serving, tool_results
from talaria import Agent
from talaria.events import Notice
from talaria.hooks.settings import Group, trust
from talaria.testing import Script, call, text
from talaria.testing.server import ScriptedProvider

GUARD = """
import json, sys
event = json.load(sys.stdin)
with open(sys.argv[1], "a") as seen:
    seen.write(json.dumps(event) + "\\n")
if "rm " in event["tool_input"].get("command", ""):
    print("rm is not allowed here; move files to ./trash instead", file=sys.stderr)
    sys.exit(2)
"""


def script(folder: Path, name: str, code: str) -> str:
    """A hook command that runs `code` with this interpreter."""
    path = folder / f"{name}.py"
    path.write_text(code)
    return f"{sys.executable} {path}"


def settings(path: Path, hooks: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"hooks": hooks}))


def one(command: str, matcher: str = "", **extra: Any) -> list[dict[str, Any]]:
    kind = {"type": "http", "url": command} if command.startswith("http") else {"command": command}
    return [{"matcher": matcher, "hooks": [{"type": "command", **kind, **extra}]}]


def noticed(agent: Agent) -> list[str]:
    notices: list[str] = []
    agent.subscribe(lambda e: notices.append(e.message) if isinstance(e, Notice) else None)
    return notices


def user_text(request: Any, index: int = 1) -> str:
    users = [m for m in request.body["messages"] if m["role"] == "user"]
    return str(users[index - 1]["content"])


def test_a_pre_tool_use_hook_exiting_2_blocks_the_command_and_the_model_reads_why(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    seen = tmp_path / "seen.jsonl"
    guard = script(tmp_path, "guard", GUARD)
    settings(tmp_path / "settings.json", {"PreToolUse": one(f"{guard} {seen}", matcher="Bash")})
    victim = tmp_path / "keep.txt"
    victim.write_text("precious")
    provider.add(
        call("terminal", {"command": f"rm {victim}"}),
        call("terminal", {"command": "echo fine"}),
        text("ok"),
    )
    agent = scripted_agent(provider, tmp_path, toolsets=["terminal"], tools=[])

    result = agent.run_conversation("clean up")

    blocked, allowed = tool_results(result)
    assert blocked == "Blocked by a hook: rm is not allowed here; move files to ./trash instead"
    assert victim.read_text() == "precious"
    assert "fine" in allowed
    assert "rm is not allowed here" in json.dumps(provider.requests[1].body["messages"])
    first = json.loads(seen.read_text().splitlines()[0])
    assert first["hook_event_name"] == "PreToolUse"
    assert first["tool_name"] == "terminal"
    assert first["tool_input"] == {"command": f"rm {victim}"}
    assert first["cwd"] == str(tmp_path)
    assert first["session_id"] == result["session_id"]


def test_user_prompt_submit_and_session_start_hooks_add_context(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    context = {"hookSpecificOutput": {"additionalContext": "The on-call engineer is Ada."}}
    submit = script(tmp_path, "submit", f"print({json.dumps(json.dumps(context))})")
    start = script(tmp_path, "start", "print('Branch: main, 2 files changed')")
    settings(
        tmp_path / "settings.json",
        {"UserPromptSubmit": one(submit), "SessionStart": one(start)},
    )
    provider.add(text("Ada"), text("still Ada"))
    agent = scripted_agent(provider, tmp_path)

    agent.run_conversation("who is on call?")
    agent.run_conversation("and now?")

    first = user_text(provider.requests[0])
    assert first.startswith("who is on call?\n\n[Context from hooks]\n")
    assert "Branch: main, 2 files changed" in first
    assert "The on-call engineer is Ada." in first
    second = user_text(provider.requests[1], 2)
    assert "The on-call engineer is Ada." in second
    assert "Branch: main" not in second  # SessionStart ran once, for the session's start


class _Endpoint(BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.received.append({"body": body, "auth": self.headers.get("Authorization")})
        answer = {
            "hookSpecificOutput": {
                "hookEventName": "PreToolUse",
                "permissionDecision": "deny",
                "permissionDecisionReason": "the policy server says no adding on Fridays",
            }
        }
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def endpoint() -> Iterator[str]:
    _Endpoint.received = []
    with serving(HTTPServer(("127.0.0.1", 0), _Endpoint)) as server:
        yield f"http://127.0.0.1:{server.server_port}/hook"


def test_an_http_hook_decides_like_a_command(
    provider: ScriptedProvider, tmp_path: Path, endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOOK_TOKEN", "s3cret")
    hook = {
        "type": "http",
        "url": endpoint,
        "headers": {"Authorization": "Bearer $HOOK_TOKEN"},
        "allowedEnvVars": ["HOOK_TOKEN"],
    }
    settings(tmp_path / "settings.json", {"PreToolUse": [{"matcher": "add", "hooks": [hook]}]})
    provider.add(call("add", {"a": 1, "b": 2}), text("ok"))
    agent = scripted_agent(provider, tmp_path)

    result = agent.run_conversation("add")

    assert tool_results(result) == [
        "Blocked by a hook: the policy server says no adding on Fridays"
    ]
    (received,) = _Endpoint.received
    assert received["auth"] == "Bearer s3cret"
    assert received["body"]["tool_input"] == {"a": 1, "b": 2}


def test_a_hanging_hook_times_out_with_one_notice_and_the_call_runs(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    hang = script(tmp_path, "hang", "import time\ntime.sleep(3600)")
    settings(tmp_path / "settings.json", {"PreToolUse": one(hang, matcher="add", timeout=0.5)})
    provider.add(call("add", {"a": 2, "b": 3}), text("5"))
    agent = scripted_agent(provider, tmp_path)
    notices = noticed(agent)

    result = agent.run_conversation("add")

    assert tool_results(result) == ["5"]
    timed_out = [n for n in notices if "timed out" in n]
    assert len(timed_out) == 1
    assert timed_out[0].startswith("PreToolUse hook `") and "after 0.5 s" in timed_out[0]


def test_json_output_can_rewrite_the_input(provider: ScriptedProvider, tmp_path: Path) -> None:
    rewrite = {"hookSpecificOutput": {"permissionDecision": "allow", "updatedInput": {"b": 40}}}
    hook = script(tmp_path, "rewrite", f"print({json.dumps(json.dumps(rewrite))})")
    settings(tmp_path / "settings.json", {"PreToolUse": one(hook, matcher="ad+")})
    provider.add(call("add", {"a": 2, "b": 3}), text("42"))

    result = scripted_agent(provider, tmp_path).run_conversation("add")

    assert tool_results(result) == ["42"]


def test_a_stop_hook_sends_the_model_back_once(provider: ScriptedProvider, tmp_path: Path) -> None:
    code = (
        "import json, sys\n"
        "if not json.load(sys.stdin)['stop_hook_active']:\n"
        "    print('run the tests before you stop', file=sys.stderr)\n"
        "    sys.exit(2)\n"
    )
    settings(tmp_path / "settings.json", {"Stop": one(script(tmp_path, "stop", code))})
    provider.add(text("done"), text("tests pass, done"))

    result = scripted_agent(provider, tmp_path).run_conversation("fix it")

    assert result["final_response"].endswith("tests pass, done")
    assert "run the tests before you stop" in user_text(provider.requests[1], 2)


def test_project_hooks_run_only_once_trusted_and_as_trusted(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    marker = tmp_path / "ran"
    touch = script(tmp_path, "touch", f"open({str(marker)!r}, 'a').write('x')")
    settings(project / ".talaria" / "settings.json", {"UserPromptSubmit": one(touch)})
    provider.add(text("one"), text("two"), text("three"))

    untrusted = scripted_agent(provider, home, cwd=project)
    notices = noticed(untrusted)
    untrusted.run_conversation("hi")
    assert not marker.exists()
    assert any("do not run until you trust them" in n for n in notices)

    trust(home, project)
    scripted_agent(provider, home, cwd=project).run_conversation("hi")
    assert marker.read_text() == "x"

    settings(project / ".talaria" / "settings.json", {"UserPromptSubmit": one(touch + " again")})
    scripted_agent(provider, home, cwd=project).run_conversation("hi")
    assert marker.read_text() == "x"  # changed since it was trusted: not run


def test_a_hook_cannot_allow_a_write_outside_the_sandbox(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    allow = {"hookSpecificOutput": {"permissionDecision": "allow"}}
    hook = script(tmp_path, "allow", f"print({json.dumps(json.dumps(allow))})")
    settings(home / "settings.json", {"PreToolUse": one(hook)})
    outside = tmp_path / "outside.txt"
    provider.add(call("write_file", {"path": str(outside), "content": "x"}), text("ok"))
    agent = scripted_agent(
        provider, home, cwd=project, toolsets=["file"], tools=[], config={"approvals.mode": "off"}
    )

    result = agent.run_conversation("write")

    assert tool_results(result)[0].startswith("Refused:")
    assert not outside.exists()


def test_a_permission_request_hook_answers_for_the_user(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    code = (
        "import json, sys\n"
        "event = json.load(sys.stdin)\n"
        "allowed = event['tool_input']['command'].endswith('build')\n"
        "behaviour = {'behavior': 'allow'} if allowed else "
        "{'behavior': 'deny', 'message': 'only build/ may go'}\n"
        "print(json.dumps({'hookSpecificOutput': {'decision': behaviour}}))\n"
    )
    hook = script(tmp_path, "permission", code)
    settings(tmp_path / "settings.json", {"PermissionRequest": one(hook, matcher="Bash")})
    (tmp_path / "build").mkdir()
    (tmp_path / "src").mkdir()
    provider.add(
        call("terminal", {"command": "rm -rf build"}),
        call("terminal", {"command": "rm -rf src"}),
        text("ok"),
    )
    asked: list[str] = []
    agent = scripted_agent(
        provider,
        tmp_path,
        toolsets=["terminal"],
        tools=[],
        approval_callback=lambda request: asked.append(request.command) or "deny",
    )

    result = agent.run_conversation("clean")

    removed, kept = tool_results(result)
    assert not (tmp_path / "build").exists() and (tmp_path / "src").is_dir()
    assert not removed.startswith(("Denied", "Error"))
    assert kept == "Denied by a PermissionRequest hook: only build/ may go"
    assert asked == []  # the hook answered both; nobody was asked


def test_a_post_tool_use_hook_tells_the_model_something(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    note = {"decision": "block", "reason": "the result is cached; rerun with --fresh"}
    hook = script(tmp_path, "post", f"print({json.dumps(json.dumps(note))})")
    settings(tmp_path / "settings.json", {"PostToolUse": one(hook, matcher="add")})
    provider.add(call("add", {"a": 1, "b": 1}), text("2"))

    result = scripted_agent(provider, tmp_path).run_conversation("add")

    assert tool_results(result) == [
        "2\n\n[PostToolUse hook] the result is cached; rerun with --fresh"
    ]


def test_a_user_prompt_submit_hook_exiting_2_keeps_the_prompt_from_the_model(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    code = (
        "import json, sys\n"
        "if 'password' in json.load(sys.stdin)['prompt']:\n"
        "    print('the prompt holds a password; not sent', file=sys.stderr)\n"
        "    sys.exit(2)\n"
    )
    settings(tmp_path / "settings.json", {"UserPromptSubmit": one(script(tmp_path, "p", code))})
    provider.add(text("fine"))
    agent = scripted_agent(provider, tmp_path)
    notices = noticed(agent)

    blocked = agent.run_conversation("my password is hunter2")
    allowed = agent.run_conversation("hello")

    assert blocked["turn_exit_reason"] == "halted:prompt blocked by a hook"
    assert blocked["final_response"] is None
    assert "the prompt was blocked by a hook: the prompt holds a password; not sent" in notices
    assert allowed["final_response"] == "fine"
    assert len(provider.requests) == 1
    assert "hunter2" not in json.dumps(provider.requests[0].body)


def test_a_pre_tool_use_ask_puts_a_harmless_call_to_the_user(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    ask = {
        "hookSpecificOutput": {
            "permissionDecision": "ask",
            "permissionDecisionReason": "adding is audited",
        }
    }
    hook = script(tmp_path, "ask", f"print({json.dumps(json.dumps(ask))})")
    settings(tmp_path / "settings.json", {"PreToolUse": one(hook, matcher="add")})
    provider.add(call("add", {"a": 1, "b": 2}), call("add", {"a": 2, "b": 2}), text("done"))
    asked: list[Any] = []

    def answer(request: Any) -> str:
        asked.append(request)
        return "once" if len(asked) == 1 else "deny"

    result = scripted_agent(provider, tmp_path, approval_callback=answer).run_conversation("add")

    first, second = tool_results(result)
    assert first == "3" and second.startswith("Denied by the user")
    assert [r.reason for r in asked] == ["a hook asks: adding is audited"] * 2


def test_subagent_stop_fires_for_a_delegate_child_and_can_send_it_back(tmp_path: Path) -> None:
    seen = tmp_path / "stops.jsonl"
    code = (
        "import json, sys\n"
        "event = json.load(sys.stdin)\n"
        f"open({str(seen)!r}, 'a').write(json.dumps(event) + '\\n')\n"
        "if not event['stop_hook_active']:\n"
        "    print('also list what you skipped', file=sys.stderr)\n"
        "    sys.exit(2)\n"
    )
    hook = one(script(tmp_path, "substop", code))
    settings(tmp_path / "settings.json", {"SubagentStop": hook, "Stop": hook})

    def step(body: dict[str, Any]) -> Any:
        users = [str(m["content"]) for m in body["messages"] if m["role"] == "user"]
        if any("Goal:" in u for u in users):  # the child
            return text("skipped: nothing") if "also list" in users[-1] else text("child done")
        if body["messages"][-1]["role"] == "tool":
            return text("parent done")
        if "also list" in users[-1]:
            return text("parent done, nothing skipped")
        return call("delegate_task", {"goal": "tidy up"})

    with ScriptedProvider(script=Script(fallback=step)) as provider:
        agent = scripted_agent(provider, tmp_path, tools=[], toolsets=["delegation"])
        result = agent.run_conversation("go")

    events = [json.loads(line) for line in seen.read_text().splitlines()]
    names = [(e["hook_event_name"], e["stop_hook_active"]) for e in events]
    assert names == [
        ("SubagentStop", False),
        ("SubagentStop", True),
        ("Stop", False),
        ("Stop", True),
    ]
    assert events[1]["last_assistant_message"] == "skipped: nothing"
    assert "skipped: nothing" in json.dumps(result["messages"])


@pytest.mark.parametrize(
    ("matcher", "tool", "selected"),
    [
        ("Bash", "terminal", True),
        ("Edit|Write", "patch", True),
        ("MultiEdit", "patch", True),
        ("Glob", "search_files", True),
        ("Task", "delegate_task", True),
        ("Bash", "read_file", False),
        ("read_file", "read_file", True),
    ],
)
def test_a_matcher_selects_a_tool_by_its_own_or_claude_codes_name(
    matcher: str, tool: str, selected: bool
) -> None:
    assert Group(matcher, ()).matches(tool) is selected
