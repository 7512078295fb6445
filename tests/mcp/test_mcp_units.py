"""The pure parts of the MCP client: configuration, names, schemas (no servers needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from talaria import Agent
from talaria.config import ConfigError
from talaria.mcp.config import expand, expanded, parse_servers
from talaria.mcp.names import assign_names, tool_name
from talaria.mcp.schema import normalise_schema

WIRE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


def test_the_claude_code_shape_parses_with_defaults() -> None:
    (stdio, web) = parse_servers(
        {
            "files": {"command": "npx", "args": ["-y", "server"], "env": {"A": "1"}},
            "web": {"url": "https://example.test/mcp", "headers": {"X-Key": "k"}},
        }
    )
    assert (stdio.transport, stdio.args, dict(stdio.env), stdio.approval) == (
        "stdio",
        ("-y", "server"),
        {"A": "1"},
        "ask",
    )
    assert (web.transport, web.url, web.timeout, web.startup_timeout) == (
        "http",
        "https://example.test/mcp",
        60.0,
        20.0,
    )


def test_type_picks_the_http_transport_as_claude_code_writes_it() -> None:
    servers = parse_servers(
        {
            "old": {"type": "sse", "url": "http://h/sse"},
            "new": {"type": "http", "url": "http://h/mcp"},
            "local": {"type": "stdio", "command": "x"},
        }
    )
    assert [server.transport for server in servers] == ["sse", "http", "stdio"]


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({}, "needs exactly one of 'command' (stdio) or 'url'"),
        ({"command": "x", "url": "http://h"}, "needs exactly one of"),
        ({"command": "x", "approval": "maybe"}, "approval must be 'ask' or 'allow'"),
        ({"command": "x", "timeout": 0}, "timeout must be a positive number"),
        ({"command": "x", "args": "a b"}, "args must be a list of strings"),
        ({"command": "x", "comand": "y"}, "unknown key(s) comand"),
        ({"command": "x", "tools": {"include": "echo"}}, "tools.include must be a list"),
        ("npx server", "must be a mapping"),
        ({"command": "x", "type": "sse"}, "type sse needs 'url'"),
        ({"url": "http://h", "type": "stdio"}, "type stdio needs 'command'"),
        ({"url": "http://h", "type": "websocket"}, "type must be one of stdio, http, sse"),
    ],
)
def test_a_bad_entry_is_one_clear_error(entry: object, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        parse_servers({"broken": entry})
    assert "mcp_servers.broken" in str(error.value) and message in str(error.value)


def test_agent_construction_rejects_a_bad_server(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"mcp_servers\.x needs exactly one"):
        Agent(model="m", api_key="k", home=tmp_path, mcp_servers={"x": {}})


def test_environment_references_are_expanded_at_start() -> None:
    env = {"TOKEN": "abc", "EMPTY": ""}
    assert expand("Bearer ${TOKEN}", env) == "Bearer abc"
    assert expand("${MISSING:-fallback}/${EMPTY:-x}", env) == "fallback/x"
    with pytest.raises(ConfigError, match="MISSING is not set"):
        expand("${MISSING}", env)
    (server,) = parse_servers(
        {"s": {"url": "http://${HOST:-localhost}/mcp", "headers": {"Authorization": "${TOKEN}"}}}
    )
    filled = expanded(server, env)
    assert (filled.url, dict(filled.headers)) == ("http://localhost/mcp", {"Authorization": "abc"})
    assert "abc" not in server.describe() and "abc" not in filled.describe()


def test_names_fit_every_wire_api_and_collisions_are_deterministic() -> None:
    pairs = [("my server", "read.file"), ("my_server", "read_file"), ("s" * 50, "t" * 50)]
    names = assign_names(pairs)
    assert names[0] == "mcp__my_server__read_file"
    assert names[1] != names[0] and names[1].startswith("mcp__my_server__read_file_")
    assert all(WIRE_NAME.match(name) for name in names)
    assert assign_names(pairs) == names
    assert tool_name("s" * 50, "t" * 50) == names[2] and len(names[2]) == 64
    assert assign_names([("a", "b")], taken=["mcp__a__b"]) != ["mcp__a__b"]


def test_schemas_are_made_acceptable_to_all_three_apis() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "anyOf": [{"required": ["a"]}, {"required": ["b"]}],
        "properties": {"a": {"type": "string"}, "b": {"type": ["number", "null"]}},
        "required": ["a", "ghost"],
    }
    assert normalise_schema(schema) == {
        "type": "object",
        "properties": {"a": {"type": "string"}, "b": {"type": ["number", "null"]}},
        "required": ["a"],
    }
    assert normalise_schema(None) == {"type": "object", "properties": {}}
    assert normalise_schema({"type": "object"}) == {"type": "object", "properties": {}}
