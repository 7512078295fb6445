"""`talaria sessions list|show|export|rename|delete`, and the session formatting the chat's
/sessions and /resume share.

Output is plain text (no colours) so it pipes and greps well; `export` writes JSONL (one
OpenAI-format message per line, loadable as `conversation_history`) or Markdown.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from talaria.cli.main import EXIT_AGENT_FAILURE, EXIT_OK

if TYPE_CHECKING:
    from talaria.store.base import SessionInfo, SessionStore


def relative_time(timestamp: float, now: float | None = None) -> str:
    seconds = max(0.0, (now if now is not None else time.time()) - timestamp)
    for limit, unit, size in (
        (60, "", 1),
        (3600, "m", 60),
        (86400, "h", 3600),
        (7 * 86400, "d", 86400),
    ):
        if seconds < limit:
            return "just now" if not unit else f"{int(seconds // size)}{unit} ago"
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d")


def _cell(text: str, width: int) -> str:
    text = " ".join(text.split())
    return (text if len(text) <= width else text[: width - 1] + "…").ljust(width)


def session_table(infos: list[SessionInfo], width: int = 80, now: float | None = None) -> str:
    """Sessions as aligned rows: id, title, last activity, message count, first message."""
    if not infos:
        return "no sessions yet"
    id_width = max(len(info.id) for info in infos)
    fixed = id_width + 2 + 18 + 2 + 9 + 2 + 5 + 2
    preview_width = max(10, width - fixed)
    header = (
        f"{'ID'.ljust(id_width)}  {'TITLE'.ljust(18)}  {'ACTIVE'.ljust(9)}  "
        f"{'MSGS':>5}  FIRST MESSAGE"
    )
    rows = [header]
    for info in infos:
        rows.append(
            f"{info.id.ljust(id_width)}  {_cell(info.title or '-', 18)}  "
            f"{relative_time(info.updated_at or info.created_at, now).ljust(9)}  "
            f"{info.message_count:>5}  {_cell(info.preview or '', preview_width).rstrip()}"
        )
    return "\n".join(rows)


def _fence(text: str) -> str:
    """A backtick fence longer than any backtick run inside `text`."""
    longest, run = 0, 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _fenced(text: str, lang: str = "") -> str:
    fence = _fence(text)
    return f"{fence}{lang}\n{text}\n{fence}"


def export_markdown(info: SessionInfo, messages: Sequence[Mapping[str, Any]]) -> str:
    """A readable transcript: one section per message, tool calls and results fenced."""
    from talaria.store.base import content_text

    lines = [f"# {info.title or info.id}", ""]
    lines.append(f"- session: `{info.id}`")
    if info.model:
        lines.append(f"- model: {info.provider + ':' if info.provider else ''}{info.model}")
    lines.append(
        f"- created: {datetime.fromtimestamp(info.created_at).isoformat(timespec='seconds')}"
    )
    lines.append(f"- messages: {len(messages)}")
    names: dict[str, str] = {}
    for message in messages:
        role = message.get("role", "?")
        text = content_text(message.get("content"))
        if role == "tool":
            call_id = str(message.get("tool_call_id", ""))
            lines += ["", f"## Tool result (`{names.get(call_id, 'tool')}`)", "", _fenced(text)]
            continue
        lines += ["", f"## {role.capitalize()}", ""]
        if message.get("reasoning"):
            lines += [f"> {line}" for line in str(message["reasoning"]).splitlines()] + [""]
        if text:
            lines.append(text)
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            names[str(call.get("id"))] = str(function.get("name"))
            arguments = _pretty_json(function.get("arguments", ""))
            lines += ["", f"**Tool call** `{function.get('name')}`", "", _fenced(arguments, "json")]
    return "\n".join(lines).rstrip() + "\n"


def _pretty_json(raw: Any) -> str:
    try:
        return json.dumps(json.loads(raw), indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(raw)


def export_jsonl(messages: Sequence[Mapping[str, Any]]) -> str:
    return "".join(json.dumps(message, ensure_ascii=False) + "\n" for message in messages)


def session_header(info: SessionInfo) -> str:
    usage = info.usage or {}
    parts = [f"session {info.id}" + (f"  “{info.title}”" if info.title else "")]
    detail = [
        f"{info.message_count} messages",
        f"created {datetime.fromtimestamp(info.created_at).strftime('%Y-%m-%d %H:%M')}",
    ]
    if info.model:
        detail.insert(0, f"{info.provider + ':' if info.provider else ''}{info.model}")
    if usage.get("total_tokens"):
        detail.append(f"{usage['total_tokens']} tokens")
    parts.append(" · ".join(detail))
    if info.cwd:
        parts.append(f"cwd {info.cwd}")
    return "\n".join(parts)


# ---- the command ------------------------------------------------------------------------


def existing_store(home: str | Path | None) -> SessionStore | None:
    """The session store the agent of `home` uses (`store.url`, else the home's state.db), or
    None when that is a SQLite file no session was ever saved in (reading sessions must not
    create the database). A bad configuration raises `ConfigError`."""
    from talaria.config import Config
    from talaria.store import factory

    return factory.existing_store(Config.load(home))


def run_sessions(args: argparse.Namespace) -> int:
    from talaria.store.base import StoreError

    store = existing_store(args.home)
    if store is None:
        if args.action == "list":
            print("no sessions yet")
            return EXIT_OK
        print(f"talaria: no sessions yet, so nothing to {args.action}", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    try:
        return _ACTIONS[args.action](store, args)
    except StoreError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    finally:
        store.close()


def _list(store: SessionStore, args: argparse.Namespace) -> int:
    import shutil

    width = shutil.get_terminal_size((100, 24)).columns
    print(session_table(store.list_sessions(limit=args.limit), width=width))
    return EXIT_OK


def _resolved(store: SessionStore, args: argparse.Namespace) -> SessionInfo | None:
    if not args.ref:
        print(
            f"talaria: sessions {args.action} needs a session id, title or 'latest'",
            file=sys.stderr,
        )
        return None
    info = store.get_session(store.resolve(args.ref))
    if info is None:
        print(f"talaria: no session {args.ref!r}", file=sys.stderr)
    return info


def _show(store: SessionStore, args: argparse.Namespace) -> int:
    info = _resolved(store, args)
    if info is None:
        return EXIT_AGENT_FAILURE
    messages = store.load_messages(info.id)
    transcript = export_markdown(info, messages).split("\n", 1)[1].lstrip("\n")
    print(session_header(info))
    print()
    print(transcript, end="")
    return EXIT_OK


def _export(store: SessionStore, args: argparse.Namespace) -> int:
    info = _resolved(store, args)
    if info is None:
        return EXIT_AGENT_FAILURE
    messages = store.load_messages(info.id)
    text = export_markdown(info, messages) if args.format == "markdown" else export_jsonl(messages)
    sys.stdout.write(text)
    return EXIT_OK


def _rename(store: SessionStore, args: argparse.Namespace) -> int:
    info = _resolved(store, args)
    if info is None:
        return EXIT_AGENT_FAILURE
    if not args.value:
        print("talaria: sessions rename needs the new title", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    store.rename(info.id, args.value)
    print(f"renamed {info.id} to “{args.value}”")
    return EXIT_OK


def _delete(store: SessionStore, args: argparse.Namespace) -> int:
    info = _resolved(store, args)
    if info is None:
        return EXIT_AGENT_FAILURE
    if sys.stdin.isatty():
        label = f"{info.id}" + (f" “{info.title}”" if info.title else "")
        reply = input(f"delete session {label} ({info.message_count} messages)? [y/N] ")
        if reply.strip().lower() not in ("y", "yes"):
            print("kept")
            return EXIT_OK
    from talaria.checkpoints import remove_session
    from talaria.config import Config

    store.delete_session(info.id)
    remove_session(Config.load(args.home).home, info.id)
    print(f"deleted {info.id}")
    return EXIT_OK


_ACTIONS: dict[str, Callable[[SessionStore, argparse.Namespace], int]] = {
    "list": _list,
    "show": _show,
    "export": _export,
    "rename": _rename,
    "delete": _delete,
}
