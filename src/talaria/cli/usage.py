"""`talaria usage [--since 7d] [--by model|day|session] [--json]`, and the table `/usage` shows.

Numbers come from the usage records the agent saves at the end of every turn (one per model
the turn used), so reports cover turns run with this version onwards. Tokens are the disjoint
buckets `run_conversation` returns; "cached" is the share of the prompt read from the cache.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING

from talaria.cli.main import EXIT_AGENT_FAILURE, EXIT_OK
from talaria.store.usage import UsageRow, summarise, total

if TYPE_CHECKING:
    from talaria.store.base import SessionStore

_SPAN = re.compile(r"^(\d+)\s*([mhdw])$")
_SECONDS = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
COLUMNS = (
    ("calls", 5),
    ("input", 9),
    ("output", 9),
    ("cache read", 10),
    ("cache write", 11),
    ("reasoning", 9),
    ("total", 10),
    ("cached", 6),
    ("cost", 17),
)


def parse_since(text: str, now: float | None = None) -> float | None:
    """`7d`, `24h`, `30m`, `2w` before now, a date (`2026-11-01`, local midnight), or `all`."""
    value = text.strip().lower()
    if value == "all":
        return None
    match = _SPAN.match(value)
    if match:
        return (now if now is not None else time.time()) - int(match[1]) * _SECONDS[match[2]]
    try:
        return datetime.strptime(value, "%Y-%m-%d").timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a span like 7d, 24h, 30m or 2w, a date like 2026-11-01, or 'all'; "
            f"got {text!r}"
        ) from None


def cost_text(row: UsageRow) -> str:
    """Known prices summed; 'unknown' when no call had a price, '+ unknown' when some."""
    if row.calls and row.unpriced_calls == row.calls:
        return "unknown"
    cost = row.cost_usd
    amount = f"${cost:.2f}" if cost >= 1 or cost == 0 else f"${cost:.4f}"
    return f"{amount} + unknown" if row.unpriced_calls else amount


def _cells(row: UsageRow) -> list[str]:
    t = row.tokens
    ratio = row.cache_hit_ratio
    return [
        f"{row.calls:,}",
        f"{t['input_tokens']:,}",
        f"{t['output_tokens']:,}",
        f"{t['cache_read_tokens']:,}",
        f"{t['cache_write_tokens']:,}",
        f"{t['reasoning_tokens']:,}",
        f"{row.total_tokens:,}",
        "-" if ratio is None else f"{ratio:.0%}",
        cost_text(row),
    ]


def usage_table(rows: list[UsageRow], heading: str, labels: dict[str, str] | None = None) -> str:
    """Aligned rows under a header, then the total (when there are several rows)."""
    names = [(labels or {}).get(row.key, row.key) for row in rows]
    width = max([len(heading), len("total"), *(len(name) for name in names)])
    lines = [heading.upper().ljust(width) + "".join(f"  {t.upper():>{w}}" for t, w in COLUMNS)]
    shown = list(zip(names, rows, strict=True))
    if len(rows) > 1:
        shown.append(("total", total(rows)))
    for name, row in shown:
        cells = _cells(row)
        lines.append(
            name.ljust(width)
            + "".join(f"  {c:>{w}}" for c, (_, w) in zip(cells, COLUMNS, strict=True))
        )
    return "\n".join(lines)


def session_report(store: SessionStore, session_id: str) -> str | None:
    """One session's usage by model, in the `talaria usage` format (None: nothing recorded)."""
    rows = summarise(store.usage_records(session_id=session_id), "model")
    return usage_table(rows, "model") if rows else None


def _session_labels(store: SessionStore, rows: list[UsageRow]) -> dict[str, str]:
    labels = {}
    for row in rows:
        info = store.get_session(row.key)
        title = info.title if info is not None else None
        labels[row.key] = f"{row.key} ({title[:30]})" if title else row.key
    return labels


def run_usage(args: argparse.Namespace) -> int:
    from talaria.cli.sessions import existing_store
    from talaria.store.base import StoreError

    store = existing_store(args.home)
    if store is None:  # nothing was ever saved here; reading must not create the database
        empty = {"rows": [], "total": total([]).to_dict()}
        print(json.dumps(empty, indent=2) if args.json else "no usage recorded")
        return EXIT_OK
    try:
        rows = summarise(store.usage_records(since=args.since), args.by)
        if args.json:
            report = {"rows": [r.to_dict() for r in rows], "total": total(rows).to_dict()}
            print(json.dumps(report, indent=2))
            return EXIT_OK
        if not rows:
            print("no usage recorded" + ("" if args.since is None else " in that period"))
            return EXIT_OK
        labels = _session_labels(store, rows) if args.by == "session" else None
        print(usage_table(rows, args.by, labels))
        return EXIT_OK
    except StoreError as exc:
        print(f"talaria: {exc}", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    finally:
        store.close()
