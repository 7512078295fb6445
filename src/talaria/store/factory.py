"""Which session store an agent opens: `store.url` names it, the home's SQLite file otherwise.

Every command and front end that reads or writes sessions (the agent, `serve`, `sessions`,
`usage`, `doctor`, `--resume`/`-c`, `acp`, `batch`, `mcp serve`, `worker`) gets its store from
`configured_store`, so one setting moves all of them at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from talaria.store.base import SessionStore, StoreError

if TYPE_CHECKING:
    from talaria.config_types import StoreSection

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
SQLITE_SCHEME = "sqlite:///"


class StoreSettings(Protocol):
    """What `configured_store` reads: a loaded `talaria.config.Config` is one (the store
    cannot import the configuration; the `store.*` defaults live in its schema)."""

    @property
    def home(self) -> Path: ...

    @property
    def store(self) -> StoreSection: ...


def configured_store(settings: StoreSettings) -> SessionStore:
    """The store these settings name (`store.url`, else `<home>/state.db`)."""
    store = settings.store
    return open_store(
        store.url, settings.home, pool_size=store.pool_size, lock_timeout=store.lock_timeout
    )


def existing_store(settings: StoreSettings) -> SessionStore | None:
    """`configured_store`, or None when it is a SQLite file that does not exist yet: a
    command that only reads sessions must not create the database."""
    path = sqlite_path(settings.store.url, settings.home)
    if path is not None and not path.exists():
        return None
    return configured_store(settings)


def check_writable(store: SessionStore) -> None:
    """Raise the `StoreError` a write would meet for a reason known now (a SQLite file found
    damaged when it was opened, or deleted since): a front end says so before it starts."""
    check = getattr(store, "check_writable", None)
    if check is not None:
        check()


def store_location(settings: StoreSettings) -> str:
    """Where the sessions are, for messages: the SQLite file, or the URL without credentials."""
    path = sqlite_path(settings.store.url, settings.home)
    if path is not None:
        return str(path)
    url = str(settings.store.url)
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.rpartition('@')[2]}"


def sqlite_path(url: str | None, home: Path) -> Path | None:
    """The SQLite file `url` names (None: the home's state.db); None for another kind."""
    if not url:
        return home / "state.db"
    if url.startswith(SQLITE_SCHEME):
        return Path(url[len(SQLITE_SCHEME) :]).expanduser()
    return None


def open_store(url: str | None, home: Path, *, pool_size: int, lock_timeout: float) -> SessionStore:
    """`postgresql://...` opens the PostgreSQL store (one pool of `pool_size` connections per
    process and URL); None or `sqlite:///path` opens a SQLite file (default
    `<home>/state.db`), one connection per process and file, whose operations wait up to
    `lock_timeout` seconds for another process's lock."""
    if url and url.startswith(POSTGRES_SCHEMES):
        try:
            from talaria.store.postgres import PostgresSessionStore
        except ImportError as exc:
            raise StoreError(
                f"store.url is a PostgreSQL URL but its driver is missing ({exc.name}); "
                "install talaria[postgres]"
            ) from None
        return PostgresSessionStore(url, pool_size=int(pool_size))
    from talaria.store.sqlite import SQLiteSessionStore

    path = sqlite_path(url, home)
    if path is None:
        raise StoreError(
            f"store.url {str(url).split('@')[-1]!r} is not supported: use postgresql://... "
            "or sqlite:///path (default: the home's state.db)"
        )
    # it makes the directory
    return SQLiteSessionStore.shared(path, lock_timeout=float(lock_timeout))
