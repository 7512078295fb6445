"""A custom session store: SQLite as usual, plus an audit trail of every message committed.

Any `talaria.store.base.SessionStore` works (`Agent(store=...)`); subclassing a store that
exists and extending what it does on append is the short way. A step is committed in one of
two ways (`try_append_messages` on the event loop's thread when SQLite can take it at once,
`append_messages` otherwise), so both are extended.

    python examples/custom_store.py
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from endpoint import endpoint

from talaria import Agent
from talaria.store.sqlite import SQLiteSessionStore


class AuditedStore(SQLiteSessionStore):
    """Writes each committed message to `audit`, one JSON line per message."""

    def __init__(self, path: Path, audit: Path) -> None:
        super().__init__(path)
        self.audit = audit

    def _record(self, session_id: str, items: Sequence[tuple[int, Mapping[str, Any]]]) -> None:
        with self.audit.open("a", encoding="utf-8") as out:
            for seq, message in items:
                line = {"session": session_id, "seq": seq, "role": message["role"]}
                out.write(json.dumps(line) + "\n")

    def append_messages(
        self,
        session_id: str,
        items: Sequence[tuple[int, Mapping[str, Any]]],
        *,
        writer: str | None = None,
    ) -> None:
        super().append_messages(session_id, items, writer=writer)
        self._record(session_id, items)

    def try_append_messages(
        self,
        session_id: str,
        items: Sequence[tuple[int, Mapping[str, Any]]],
        *,
        writer: str | None = None,
    ) -> bool:
        done = super().try_append_messages(session_id, items, writer=writer)
        if done:
            self._record(session_id, items)
        return done


with tempfile.TemporaryDirectory() as folder:
    audit = Path(folder, "audit.jsonl")
    store = AuditedStore(Path(folder, "sessions.db"), audit)
    with Agent(**endpoint(), store=store, home=folder, cwd=folder, tools=[]) as agent:
        print(agent.chat("Say hello in three words."))
    print(audit.read_text(), end="")
    store.close()
