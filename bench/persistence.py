"""Persistence cost per step as a session grows: append one message to a session of N messages.

Sizes 10, 100, 1,000 and 5,000; for each, a fresh session is filled to N, then single-message
appends are timed (median). talaria: `SQLiteSessionStore.append_messages`; reference:
`hermes_state.SessionDB.append_message`, both on a file in a temporary directory. The floor is
one INSERT and commit of the same JSON into a bare WAL-mode SQLite table: what any durable
append costs. A flat row (same cost at 5,000 as at 10) is the goal.

Run: python bench/persistence.py [--appends 50]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import ReferenceUnavailable, Row, loop_message, median, report, run_reference

SIZES = (10, 100, 1000, 5000)


def _timed_appends(append: Callable[[int], None], start: int, count: int) -> float:
    samples = []
    for seq in range(start, start + count):
        begin = time.perf_counter()
        append(seq)
        samples.append(time.perf_counter() - begin)
    return median(samples)


def talaria_per_append(directory: Path, sizes: tuple[int, ...], appends: int) -> dict[int, float]:
    from talaria.store.sqlite import SQLiteSessionStore

    result = {}
    with SQLiteSessionStore(directory / "talaria.db") as store:
        for size in sizes:
            session = f"s{size}"
            store.create_session(session, model="scripted-model")
            store.append_messages(session, [(i, loop_message(i)) for i in range(size)])

            def append(seq: int, session: str = session) -> None:
                store.append_messages(session, [(seq, loop_message(seq))])

            result[size] = _timed_appends(append, size, appends)
    return result


def floor_per_append(directory: Path, sizes: tuple[int, ...], appends: int) -> dict[int, float]:
    conn = sqlite3.connect(directory / "floor.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(
        "CREATE TABLE m (session TEXT, seq INTEGER, body TEXT, PRIMARY KEY (session, seq))"
    )
    insert = "INSERT INTO m VALUES (?, ?, ?)"
    result = {}
    for size in sizes:
        session = f"s{size}"
        with conn:
            conn.executemany(
                insert, [(session, i, json.dumps(loop_message(i))) for i in range(size)]
            )

        def append(seq: int, session: str = session) -> None:
            conn.execute("BEGIN")
            conn.execute(insert, (session, seq, json.dumps(loop_message(seq))))
            conn.execute("COMMIT")

        result[size] = _timed_appends(append, size, appends)
    conn.close()
    return result


def run(appends: int = 50, sizes: tuple[int, ...] = SIZES, reference: bool = True) -> list[Row]:
    notes: dict[str, Any] = {"timed appends per size": appends, "statistic": "median"}
    with tempfile.TemporaryDirectory() as tmp:
        ours = talaria_per_append(Path(tmp), sizes, appends)
        floor = floor_per_append(Path(tmp), sizes, appends)
    theirs: dict[int, float | str] = {size: "skipped" for size in sizes}
    if reference:
        try:
            answer = run_reference("persistence", sizes=list(sizes), appends=appends)
            theirs = {int(size): value for size, value in answer["per_append"].items()}
        except ReferenceUnavailable as exc:
            theirs = {size: "unavailable" for size in sizes}
            notes["reference"] = str(exc)
    notes["talaria growth (largest / smallest N)"] = round(ours[sizes[-1]] / ours[sizes[0]], 2)
    largest, smallest = theirs[sizes[-1]], theirs[sizes[0]]
    if isinstance(largest, float) and isinstance(smallest, float):
        notes["reference growth (largest / smallest N)"] = round(largest / smallest, 2)
    rows = [
        Row(
            f"append 1 message to a session of {size:,}",
            ours[size],
            theirs[size],
            floor[size],
            "us",
        )
        for size in sizes
    ]
    report("persistence", "Persistence cost per appended message", rows, notes)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--appends", type=int, default=50)
    parser.add_argument("--no-reference", action="store_true")
    args = parser.parse_args()
    run(args.appends, reference=not args.no_reference)


if __name__ == "__main__":
    main()
