"""session_search latency: full-text queries over 100,000 stored messages.

1,000 sessions of 100 messages (about 30 words each, Zipf-like word use, generated from a seed
so every backend stores the same text), then 50 queries (a third very common words, a third
two words, a third rare words), limit 10; median latency, after one untimed pass over the
queries (warm page cache). talaria: `SQLiteSessionStore.search`; reference:
`hermes_state.SessionDB.search_messages` (also SQLite FTS5, also returns snippets and
neighbouring messages, so the two are comparable). The floor is a bare FTS5 MATCH with
bm25 ordering over the same text: no snippets, no context, no session join.

Run: python bench/session_search.py [--sessions 1000] [--per-session 100] [--queries 50]
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from common import (
    ReferenceUnavailable,
    Row,
    median,
    report,
    run_reference,
    search_corpus,
    search_queries,
    stopwatch,
)


def talaria_search(
    directory: Path, sessions: int, per_session: int, queries: list[str]
) -> dict[str, Any]:
    from talaria.store.sqlite import SQLiteSessionStore

    with SQLiteSessionStore(directory / "talaria.db") as store:
        with stopwatch() as fill:
            for index, messages in enumerate(search_corpus(sessions, per_session)):
                store.create_session(f"s{index}", model="scripted-model")
                store.append_messages(f"s{index}", list(enumerate(messages)))
        for query in queries:  # one untimed pass: every side is timed with a warm page cache
            store.search(query, limit=10)
        samples, hits = [], 0
        for query in queries:
            begin = time.perf_counter()
            found = store.search(query, limit=10)
            samples.append(time.perf_counter() - begin)
            hits += bool(found)
    return {"samples": samples, "fill_seconds": fill[0], "queries_with_hits": hits}


def floor_search(
    directory: Path, sessions: int, per_session: int, queries: list[str]
) -> dict[str, Any]:
    conn = sqlite3.connect(directory / "floor.db", isolation_level=None)
    conn.execute("CREATE VIRTUAL TABLE f USING fts5(body)")
    conn.execute("BEGIN")
    for messages in search_corpus(sessions, per_session):
        conn.executemany("INSERT INTO f (body) VALUES (?)", [(m["content"],) for m in messages])
    conn.execute("COMMIT")
    search = "SELECT rowid FROM f WHERE f MATCH ? ORDER BY rank LIMIT 10"
    for query in queries:  # one untimed pass: every side is timed with a warm page cache
        conn.execute(search, (query,)).fetchall()
    samples, hits = [], 0
    for query in queries:
        begin = time.perf_counter()
        found = conn.execute(search, (query,)).fetchall()
        samples.append(time.perf_counter() - begin)
        hits += bool(found)
    conn.close()
    return {"samples": samples, "queries_with_hits": hits}


def run(
    sessions: int = 1000, per_session: int = 100, queries: int = 50, reference: bool = True
) -> list[Row]:
    asked = search_queries(queries)
    notes: dict[str, Any] = {
        "messages": sessions * per_session,
        "queries": queries,
        "statistic": "median",
        "limit": 10,
    }
    with tempfile.TemporaryDirectory() as tmp:
        ours = talaria_search(Path(tmp), sessions, per_session, asked)
        floor = floor_search(Path(tmp), sessions, per_session, asked)
    notes["talaria"] = {k: ours[k] for k in ("fill_seconds", "queries_with_hits")}
    notes["floor"] = {"queries_with_hits": floor["queries_with_hits"]}
    theirs: list[float] | str = "skipped"
    if reference:
        try:
            answer = run_reference(
                "search", sessions=sessions, per_session=per_session, queries=queries
            )
            theirs = answer["samples"]
            notes["reference"] = {
                k: answer[k] for k in ("fill_seconds", "queries_with_hits", "messages")
            }
        except ReferenceUnavailable as exc:
            theirs = "unavailable"
            notes["reference"] = str(exc)
    total = f"{sessions * per_session:,}"
    rows = [
        Row(
            f"search over {total} messages, all queries",
            median(ours["samples"]),
            _pick(theirs, KINDS),
            median(floor["samples"]),
        )
    ]
    for index, kind in enumerate(KINDS):
        rows.append(
            Row(
                f"  {kind}",
                median(ours["samples"][index::3]),
                _pick(theirs, (kind,)),
                median(floor["samples"][index::3]),
            )
        )
    report("session_search", "session_search latency (median)", rows, notes)
    return rows


KINDS = ("one very common word", "common + middling word", "one rare word")
"""The query kinds, in the order `search_queries` cycles through them."""


def _pick(samples: list[float] | str, kinds: tuple[str, ...]) -> float | str:
    """The median of the reference's samples for these query kinds (or why there are none)."""
    if isinstance(samples, str):
        return samples
    chosen = [s for i, s in enumerate(samples) if KINDS[i % 3] in kinds]
    return median(chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--per-session", type=int, default=100)
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--no-reference", action="store_true")
    args = parser.parse_args()
    run(args.sessions, args.per_session, args.queries, reference=not args.no_reference)


if __name__ == "__main__":
    main()
