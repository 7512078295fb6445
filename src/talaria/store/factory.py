"""Which session store an agent opens: `store.url` names it, the home's SQLite file otherwise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from talaria.store.base import SessionStore, StoreError

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
DEFAULT_LOCK_TIMEOUT = 10.0
"""Seconds a SQLite operation waits for another process's lock (`store.lock_timeout`)."""


def open_store(url: str | None, home: Path, options: dict[str, Any] | None = None) -> SessionStore:
    """`postgresql://...` opens the PostgreSQL store (one pool per process and URL); None or
    `sqlite:///path` opens a SQLite file (default `<home>/state.db`), one connection per
    process and file."""
    if url and url.startswith(POSTGRES_SCHEMES):
        try:
            from talaria.store.postgres import PostgresSessionStore
        except ImportError as exc:
            raise StoreError(
                f"store.url is a PostgreSQL URL but its driver is missing ({exc.name}); "
                "install talaria[postgres]"
            ) from None
        return PostgresSessionStore(url, pool_size=int((options or {}).get("pool_size", 10)))
    from talaria.store.sqlite import SQLiteSessionStore

    if url and not url.startswith("sqlite:///"):
        raise StoreError(
            f"store.url {url.split('@')[-1]!r} is not supported: use postgresql://... "
            "or sqlite:///path (default: the home's state.db)"
        )
    path = Path(url[len("sqlite:///") :]) if url else home / "state.db"
    lock_timeout = float((options or {}).get("lock_timeout", DEFAULT_LOCK_TIMEOUT))
    return SQLiteSessionStore.shared(path, lock_timeout=lock_timeout)  # it makes the directory
