"""`talaria acp` on the wire: nothing but JSON-RPC on stdout, the SDK loaded only by this
command, and an independent client (acpx, from npm) driving a whole turn."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from acp_editor import acpx_binary, agent_command, agent_env
from talaria.testing import call, text

pytestmark = pytest.mark.timeout(180)
REPO = Path(__file__).resolve().parents[2]
NOISY_PLUGIN = """
import sys
print("noise from a plugin at import")

def register(bus):
    print("noise from a plugin at register")
    bus.register("pre_tool_call", lambda **kw: print("noise from a hook"))
"""


def _send(proc: subprocess.Popen, message: dict) -> None:
    assert proc.stdin is not None
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def _until_response(lines: list[str], proc: subprocess.Popen, request_id: int) -> dict:
    assert proc.stdout is not None
    while raw := proc.stdout.readline():
        lines.append(raw.decode())
        message = json.loads(raw)
        if message.get("id") == request_id and "method" not in message:
            return message
    raise AssertionError(f"stdout closed before the answer to {request_id}: {lines}")


def test_stdout_carries_only_json_rpc(provider, tmp_path):
    home = tmp_path / "home"
    (home / "plugins").mkdir(parents=True)
    (home / "plugins" / "noisy.py").write_text(NOISY_PLUGIN)
    provider.add(call("terminal", {"command": "echo printed-by-a-command"}), text("All done."))
    work = tmp_path / "work"
    work.mkdir()
    log = tmp_path / "stderr.log"
    lines: list[str] = []
    with open(log, "wb") as errors:
        proc = subprocess.Popen(
            agent_command(provider),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errors,
            env=agent_env(home),
        )
        try:
            _send(
                proc,
                {
                    "jsonrpc": "2.0",
                    "id": 0,
                    "method": "initialize",
                    "params": {"protocolVersion": 1},
                },
            )
            _until_response(lines, proc, 0)
            _send(
                proc,
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "session/new",
                    "params": {"cwd": str(work), "mcpServers": []},
                },
            )
            session_id = _until_response(lines, proc, 1)["result"]["sessionId"]
            prompt = [{"type": "text", "text": "hi"}]
            _send(
                proc,
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "session/prompt",
                    "params": {"sessionId": session_id, "prompt": prompt},
                },
            )
            answer = _until_response(lines, proc, 2)
            proc.stdin.close()
            lines += [raw.decode() for raw in proc.stdout]
            assert proc.wait(timeout=30) == 0
        finally:
            proc.kill()
    assert answer["result"] == {"stopReason": "end_turn"}
    for line in lines:
        assert line.endswith("\n")
        assert json.loads(line)["jsonrpc"] == "2.0"
    assert any("agent_message_chunk" in line for line in lines)
    stderr = log.read_text()
    assert "noise from a plugin at import" in stderr and "noise from a hook" in stderr


def test_import_talaria_and_version_do_not_load_the_acp_sdk():
    code = (
        "import sys, talaria.cli.main as cli\n"
        "from talaria import Agent\n"
        "Agent(model='m', api_key='k')\n"
        "try:\n    cli.main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(n for n in sys.modules if n == 'acp' or n.startswith('acp.')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.npm
def test_acpx_runs_a_turn_with_a_command_in_its_terminal(provider, tmp_path):
    acpx = acpx_binary()
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    provider.add(
        call("terminal", {"command": "rm -rf junk && echo ran > ran.txt && echo ran"}),
        text("Hi from talaria"),
    )
    agent = " ".join(shlex.quote(part) for part in agent_command(provider))
    done = subprocess.run(
        [
            acpx,
            "--approve-all",
            "--format",
            "json",
            "--cwd",
            str(work),
            "--agent",
            agent,
            "exec",
            "hi",
        ],
        capture_output=True,
        text=True,
        env=agent_env(home),
        timeout=150,
    )
    assert done.returncode == 0, done.stderr
    messages = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    updates = [m["params"]["update"] for m in messages if m.get("method") == "session/update"]
    said = "".join(
        u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert said == "Hi from talaria"
    assert any(m.get("method") == "session/request_permission" for m in messages)
    assert any(m.get("method") == "terminal/create" for m in messages)
    assert {"stopReason": "end_turn"} in [m.get("result") for m in messages]
    assert (work / "ran.txt").read_text() == "ran\n"
