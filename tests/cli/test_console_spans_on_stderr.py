"""With `TALARIA_OTEL=1 OTEL_TRACES_EXPORTER=console`, spans are written to stderr: stdout
stays what the command promises, one JSON result for `--output-format json` and nothing but
JSON-RPC for `talaria mcp serve` (spans used to land in the middle of both)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from acp_editor import agent_env
from talaria.testing import ScriptedProvider, text

pytestmark = pytest.mark.timeout(120)


def _env(home: Path) -> dict[str, str]:
    return {**agent_env(home), "TALARIA_OTEL": "1", "OTEL_TRACES_EXPORTER": "console",
            "OTEL_METRICS_EXPORTER": "console"}  # fmt: skip


def _model(provider: ScriptedProvider) -> list[str]:
    return ["--base-url", provider.openai_base_url, "--model", "scripted-model", "--api-key", "k"]


def test_json_output_stays_one_json_document(provider: ScriptedProvider, tmp_path: Path) -> None:
    provider.add(text("Traced."))
    done = subprocess.run(
        [sys.executable, "-m", "talaria.cli.main", "chat", "-q", "hi", "--json",
         "--home", str(tmp_path), *_model(provider)],
        capture_output=True, text=True, env=_env(tmp_path), timeout=90,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["final_response"] == "Traced."
    assert '"trace_id"' in done.stderr


def test_mcp_serve_writes_only_protocol_to_stdout(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    provider.add(text("Done."))
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "run_task", "arguments": {"prompt": "go"}}},
    ]  # fmt: skip
    server = subprocess.Popen(
        [sys.executable, "-m", "talaria.cli.main", "mcp", "serve", "--home", str(tmp_path),
         "--toolsets", "", *_model(provider)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(tmp_path),
    )  # fmt: skip
    assert server.stdin is not None and server.stdout is not None
    replies = []
    for message in messages:
        server.stdin.write(json.dumps(message) + "\n")
        server.stdin.flush()
        if "id" in message:
            replies.append(json.loads(server.stdout.readline()))
    rest, err = server.communicate(timeout=60)
    assert [reply["id"] for reply in replies] == [1, 2]
    assert "Done." in json.dumps(replies[1]["result"])
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in rest.splitlines() if line)
    assert '"trace_id"' in err
