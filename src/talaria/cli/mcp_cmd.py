"""`talaria mcp list|add|remove|serve`: manage `mcp_servers` and serve talaria over MCP.

`add` and `remove` edit `mcp_servers` in $TALARIA_HOME/config.yaml (checked before writing, so
a bad entry never reaches the file); `list` starts each server and shows its status and the
tools the model would see; `serve` runs talaria as an MCP server on stdio.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from talaria.cli.main import EXIT_AGENT_FAILURE, EXIT_OK

if TYPE_CHECKING:
    from talaria.config import Config


def add_parser(commands: Any, add_model_options: Any) -> None:
    mcp = commands.add_parser("mcp", help="MCP servers: list, add, remove; serve talaria")
    actions = mcp.add_subparsers(dest="mcp_action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="each server, its status and its tools")
    listing.add_argument("--home")
    add = actions.add_parser(
        "add",
        help="add a server: [options] NAME -- COMMAND [ARGS...], or [options] --url URL NAME",
    )
    add.add_argument("name")
    add.add_argument("--url", help="a streamable HTTP endpoint instead of a command")
    add.add_argument("--header", action="append", default=[], metavar="NAME=VALUE")
    add.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    add.add_argument("--cwd")
    add.add_argument("--approval", choices=["ask", "allow"])
    add.add_argument("--timeout", type=float, help="seconds one tool call may take")
    add.add_argument(
        "--sandbox", action="store_true", help="run the (stdio) server inside the command sandbox"
    )
    add.add_argument("--home")
    add.add_argument(
        "server_command", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="[ARGS...]"
    )
    remove = actions.add_parser("remove", help="remove a server from the config")
    remove.add_argument("name")
    remove.add_argument("--home")
    serve = actions.add_parser("serve", help="run talaria as an MCP server on stdio")
    add_model_options(serve)


def run_mcp(args: argparse.Namespace) -> int:
    from talaria.config import ConfigError

    try:
        return int(_ACTIONS[args.mcp_action](args))
    except ConfigError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return EXIT_AGENT_FAILURE


def _config_path(args: argparse.Namespace) -> Path:
    from talaria.config import default_home

    return (Path(args.home).expanduser() if args.home else default_home()) / "config.yaml"


def _servers_in_file(path: Path) -> dict[str, Any]:
    from talaria.config import ConfigError, read_config_file

    servers = read_config_file(path).get("mcp_servers") or {}
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: mcp_servers must be a mapping")
    return dict(servers)


def _pairs(items: list[str], what: str) -> dict[str, str]:
    from talaria.config import ConfigError

    pairs = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"--{what} takes NAME=VALUE, got {item!r}")
        pairs[name] = value
    return pairs


def _add(args: argparse.Namespace) -> int:
    from talaria.config import ConfigError
    from talaria.config_write import set_config_entry
    from talaria.mcp.config import parse_servers

    path = _config_path(args)
    servers = _servers_in_file(path)
    if args.name in servers:
        raise ConfigError(f"an MCP server named {args.name!r} exists; remove it first")
    command = list(args.server_command)
    if command[:1] == ["--"]:
        command = command[1:]
    elif command and command[0].startswith("-"):
        raise ConfigError("options go before NAME: talaria mcp add [options] NAME -- COMMAND")
    entry: dict[str, Any] = {"url": args.url} if args.url else {}
    if command:
        entry["command"] = command[0]
    if command[1:]:
        entry["args"] = command[1:]
    optional = {
        "headers": _pairs(args.header, "header"),
        "env": _pairs(args.env, "env"),
        "cwd": args.cwd,
        "approval": args.approval,
        "timeout": args.timeout,
        "sandbox": args.sandbox,
    }
    entry.update({key: value for key, value in optional.items() if value})
    parse_servers({args.name: entry})
    set_config_entry(path, ["mcp_servers", args.name], entry)
    print(f"added MCP server {args.name!r} to {path}")
    return EXIT_OK


def _remove(args: argparse.Namespace) -> int:
    from talaria.config import ConfigError
    from talaria.config_write import remove_config_entry

    path = _config_path(args)
    servers = _servers_in_file(path)
    if args.name not in servers:
        known = ", ".join(servers) or "none"
        raise ConfigError(f"no MCP server named {args.name!r} (configured: {known})")
    remove_config_entry(path, ["mcp_servers", args.name])
    print(f"removed MCP server {args.name!r} from {path}")
    return EXIT_OK


def _list(args: argparse.Namespace) -> int:
    import asyncio

    from talaria.config import Config
    from talaria.mcp.config import parse_servers

    config = Config.load(args.home)
    servers = parse_servers(config.mcp_servers)
    if not servers:
        print("No MCP servers configured. Add one: talaria mcp add NAME -- COMMAND [ARGS...]")
        return EXIT_OK
    print(asyncio.run(_describe(servers, config)))
    return EXIT_OK


async def _describe(servers: list[Any], config: Config) -> str:
    from talaria.mcp.manager import MCPManager
    from talaria.mcp.tools import offered_tools
    from talaria.tools.sandbox import SandboxPolicy

    manager = MCPManager(servers, config.home, SandboxPolicy.from_config(config, Path.cwd()))
    try:
        await manager.start()
        tools = offered_tools(manager)
        return "\n".join(line for server in servers for line in _lines(server, manager, tools))
    finally:
        manager.close()


def _lines(server: Any, manager: Any, tools: list[tuple[Any, Any, str]]) -> list[str]:
    connection = manager.connections.get(server.name)
    status = "disabled" if connection is None else connection.status
    if connection is not None and connection.error:
        status += f": {connection.error}"
    names = [name for owner, _, name in tools if owner is connection]
    notes = connection.offer.notices(server) if connection is not None else []
    return [
        f"{server.name} ({server.transport}, {server.describe()}) - {status}",
        *(f"  {name}" for name in names),
        *(f"  ({note})" for note in notes),
    ]


def _serve(args: argparse.Namespace) -> int:
    from talaria.agent import Agent
    from talaria.cli.options import agent_kwargs
    from talaria.mcp.serve import serve_stdio
    from talaria.store.base import AmbiguousSession, SessionNotFound

    options = {**agent_kwargs(args), "source": "mcp", "stream": False}
    store_owner = Agent(**options)

    def make_agent(session_ref: str | None) -> Agent:
        session_id = None
        if session_ref is not None:
            try:
                session_id = str(store_owner.store.resolve(session_ref))
            except (SessionNotFound, AmbiguousSession) as exc:
                raise ValueError(str(exc)) from None
        return Agent(session_id=session_id, store=store_owner.store, **options)

    try:
        serve_stdio(make_agent, lambda limit: store_owner.store.list_sessions(limit=limit))
    finally:
        store_owner.close()
    return EXIT_OK


_ACTIONS = {"list": _list, "add": _add, "remove": _remove, "serve": _serve}
