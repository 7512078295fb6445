"""What the built-in tools' contract tests share: the registered tools, hints that keep
free-text arguments safe to run, and the working directory those hints name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hypothesis import strategies as st
from schema_calls import SAFE_TEXT

from talaria.agent_tools.catalog import builtin_tools
from web_support import WebSite

COMMANDS = st.sampled_from(
    ["echo hello", "true", "exit 3", "printf 'a\\nb'", "ls", "cat notes.txt", "cat missing.txt",
     "echo $((1 + 1))", "", "   ", "sleep 0.01", "echo err >&2"]
)  # fmt: skip
PATHS = st.one_of(
    st.sampled_from(["notes.txt", "missing.txt", "sub", "sub/inner.txt", "new.txt", ".", "",
                     "binary.bin", "deep/new/file.txt"]),
    SAFE_TEXT,
)  # fmt: skip
HINTS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "terminal": {"command": COMMANDS, "justification": SAFE_TEXT},
    "process": {"id": st.sampled_from(["bg1", "bg2", "", "nope"])},
    "read_file": {"path": PATHS},
    "write_file": {"path": PATHS},
    "patch": {"path": PATHS, "old_string": st.sampled_from(["hello", "line", "", "x"])},
    "execute_code": {
        "code": st.sampled_from(
            ["print(1)", "", "from talaria_tools import read_file\nprint(read_file('notes.txt'))"]
        )
    },
    "search_files": {
        "path": PATHS,
        "pattern": st.one_of(st.sampled_from(["(", "hel+o"]), SAFE_TEXT),
    },
}
"""Valid values for arguments whose free text would be unsafe or slow to run."""

REGISTERED = [tool.name for tool in builtin_tools()]


def web_hints(site: WebSite) -> dict[str, dict[str, st.SearchStrategy[Any]]]:
    """URLs on the loopback `site` (or refused before any connection): a generated URL must
    never reach another address; element refs that exist on its pages, or do not."""
    urls = [site.url(path, "localhost") for path in ("/article", "/notice.pdf", "/hop/2",
            "/to-private", "/missing", "/image.png")]  # fmt: skip
    bad = ["", "not a url", "ftp://localhost/file", "http://127.0.0.1:1/", "http://[::1]:1/"]
    pages = [site.url(path, "localhost") for path in ("/form", "/console", "/to-metadata")]
    refs = st.sampled_from(["e1", "e2", "e5", "", "nope"])
    return {
        "web_fetch": {"url": st.sampled_from(urls + bad)},
        "browser_navigate": {"url": st.sampled_from(pages + bad)},
        "browser_tabs": {"url": st.sampled_from([*pages, *bad, None])},
        "browser_click": {"ref": refs},
        "browser_type": {"ref": refs, "text": SAFE_TEXT},
    }


def web_config(site: WebSite) -> dict[str, Any]:
    """The settings that offer both web tools, on `site` only (its SearXNG stand-in)."""
    return {
        "web.allow_private": ["localhost"],
        "web.search.searxng_url": site.url(""),
        "sandbox.network": True,
    }


def workspace(work: Path) -> None:
    """The files the hinted paths name (a text file, a folder, a binary file)."""
    (work / "sub").mkdir(parents=True)
    (work / "notes.txt").write_text("hello\nline two\nhello again\n")
    (work / "sub" / "inner.txt").write_text("inner line\n")
    (work / "binary.bin").write_bytes(b"\x00\x01\x02binary")
