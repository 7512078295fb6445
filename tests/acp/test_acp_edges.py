"""`talaria acp` at its edges: an editor asking for a session rooted at `/` or the home
directory (which would make all of it the sandbox's writable workspace) is refused with a
JSON-RPC error, and any line on stdin that is not a usable JSON-RPC message gets a JSON-RPC
error instead of ending the agent."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import acp
import pytest

from acp_editor import Editor, agent_env, connected, editor_folders

pytestmark = pytest.mark.timeout(120)
URL = "http://127.0.0.1:9/v1"  # never called: no prompt here reaches the model

GARBAGE = [
    b"[1, 2]",
    b"[]",
    b"3",
    b'"a string"',
    b"null",
    b"true",
    b"{not json",
    b"\xff\xfe not utf-8",
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    b'{"jsonrpc": "2.0", "id": {"nested": []}, "result": 1}',
    b'{"jsonrpc": "2.0", "id": 7, "method": 5}',
    b'{"jsonrpc": "2.0", "id": 8, "error": [1]}',
    b'{"jsonrpc": "2.0", "id": 9, "method": "session/new", "params": 3}',
    b'{"jsonrpc": "1.0", "id": 10, "method": "initialize"}',
    b'{"jsonrpc": "2.0"}',
    b"x" * (51 * 1024 * 1024),  # over the 50 MiB line limit
]


def test_every_line_that_is_not_a_message_gets_a_json_rpc_error(tmp_path: Path) -> None:
    home, work = editor_folders(tmp_path)
    valid = [
        {"jsonrpc": "2.0", "id": 100, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 101,
            "method": "session/new",
            "params": {"cwd": str(work), "mcpServers": [], "extra": {"x": [1, {"y": None}]}},
        },
        {"jsonrpc": "2.0", "id": 102, "method": "session/prompt", "params": {"prompt": [1]}},
    ]
    lines = b"\n".join([*GARBAGE, *(json.dumps(m).encode() for m in valid)]) + b"\n"
    command = [sys.executable, "-m", "talaria.cli.main", "acp", "--model", "m", "--base-url", URL]
    done = subprocess.run(
        command, input=lines, capture_output=True, env=agent_env(home), timeout=90
    )
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    assert b"Traceback" not in done.stderr, done.stderr.decode()[-2000:]
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    errors = answers[: len(GARBAGE)]
    assert [a["error"]["code"] for a in errors] == [
        -32600, -32600, -32600, -32600, -32600, -32600,
        -32700, -32700, -32700, -32700,
        -32600, -32600, -32600, -32600, -32600, -32600,
        -32700,
    ]  # fmt: skip
    assert [a["id"] for a in errors] == [None] * 11 + [7, 8, 9, 10, None, None]
    assert all(a["jsonrpc"] == "2.0" and a["error"]["message"] for a in errors)
    by_id = {a.get("id"): a for a in answers[len(GARBAGE) :]}
    assert by_id[100]["result"]["agentInfo"]["name"] == "talaria"  # still serving
    assert by_id[101]["result"]["sessionId"]
    assert by_id[102]["error"]["code"] == -32602  # a message, with invalid params


@pytest.mark.parametrize("where", ["root", "home", "above home"])
async def test_a_session_at_the_root_or_the_home_is_refused(provider, tmp_path, where) -> None:
    home, work = editor_folders(tmp_path)  # the agent's HOME is `home`
    cwd = {"root": Path("/"), "home": home, "above home": tmp_path}[where]
    async with connected(Editor(), provider, home) as conn:
        with pytest.raises(acp.RequestError) as refused:
            await conn.new_session(cwd=str(cwd), mcp_servers=[])
        session = await conn.new_session(cwd=str(work), mcp_servers=[])
        with pytest.raises(acp.RequestError) as reloaded:
            await conn.load_session(cwd=str(cwd), session_id=session.session_id, mcp_servers=[])
    for error in (refused.value, reloaded.value):
        assert error.code == -32602
        assert "home directory" in str(error.data) and "project folder" in str(error.data)
    assert session.session_id


def test_no_page_of_the_docs_passes_a_key_on_the_command_line() -> None:
    """Arguments are readable by every process (`/proc/<pid>/cmdline`): keys go in the
    environment or the config."""
    root = Path(__file__).resolve().parents[2]
    pages = [root / "README.md", *sorted((root / "docs").glob("**/*.md"))]
    passing = [
        f"{page.relative_to(root)}:{number}"
        for page in pages
        for number, line in enumerate(page.read_text().splitlines(), 1)
        if re.search(r"--api-key\b|api_key=['\"]?(sk-|\$)", line)
    ]
    assert len(pages) > 5 and passing == []
