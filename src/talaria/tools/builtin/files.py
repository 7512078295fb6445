"""The file tools: read_file, write_file, patch and search_files.

Paths resolve against the task's working directory (absolute paths are allowed). Writes are
atomic (a temp file in the same directory, then a rename) and writers to one path take turns
(a per-path lock), so parallel tool calls never interleave or lose an edit. A write goes
through the same boundary as a command (`talaria.tools.write_boundary`): the executor asks
before the call, and the tool writes exactly the real path that was judged, opened without
following links (`talaria.tools.nofollow`).
"""

from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from talaria.messages.media import MAX_IMAGE_BYTES, image_type, save_image
from talaria.policy.sensitive_paths import resolve_path
from talaria.tools import nofollow
from talaria.tools.base import Tool, ToolContext, ToolError
from talaria.tools.write_boundary import check_write

DEFAULT_LIMIT = 500
MAX_LINE_CHARS = 2_000
MAX_DIFF_CHARS = 20_000
_SNIFF_BYTES = 8_192
MAX_MATCHES = 200
MAX_MATCH_CHARS = 300
_MAX_SEARCH_BYTES = 10_000_000
_SKIP_DIRS = frozenset({"node_modules", "__pycache__", "venv", "site-packages"})
_SECRET_GLOBS = ("*.env", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519")
"""Secret files ripgrep would search (it already skips hidden ones such as .env)."""
"""Besides hidden directories (.git, .venv ...): vendored code nobody means to search."""

_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()


def path_lock(path: Path) -> threading.Lock:
    """One lock per real file, so two names for the same file (a symlink) share it."""
    key = Path(os.path.realpath(path))
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


def _missing(path: Path) -> ToolError:
    parent = path.parent
    if not parent.is_dir():
        return ToolError(f"{path} does not exist (nor does the directory {parent})")
    import difflib  # the diff helpers load with the first miss, edit or diff

    names = [entry.name for entry in parent.iterdir()]
    close = difflib.get_close_matches(path.name, names, n=3, cutoff=0.5)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    return ToolError(f"{path} does not exist.{hint}")


def _existing_file(raw: str, cwd: Path) -> Path:
    path = resolve_path(raw, cwd)
    if not path.exists():
        raise _missing(path)
    if path.is_dir():
        raise ToolError(f"{path} is a directory; list it with search_files(target='files')")
    return path


def _refuse_binary(path: Path, head: bytes) -> None:
    if b"\0" in head[:_SNIFF_BYTES]:
        size = path.stat().st_size
        raise ToolError(f"{path} is a binary file ({size} bytes); read_file only shows text")


def read_file(path: str, ctx: ToolContext, offset: int = 1, limit: int = DEFAULT_LIMIT) -> str:
    """Lines `offset`.. (1-based) of a text file, numbered as "N|line"."""
    offset = check_window(offset, limit)
    target = _existing_file(path, ctx.cwd)
    with open(target, "rb") as handle:
        head = handle.read(_SNIFF_BYTES)
        mime = image_type(head)
        if mime is not None:
            return _read_image(target, mime, head + handle.read(MAX_IMAGE_BYTES), ctx)
        _refuse_binary(target, head)
        handle.seek(0)
        lines = (raw.decode("utf-8", errors="replace").rstrip("\r\n") for raw in handle)
        return number_lines(lines, str(target), offset, limit)


def _read_image(path: Path, mime: str, raw: bytes, ctx: ToolContext) -> str:
    """An image (known by its bytes, not its name) is saved among the home's media, where the
    loop shows it to a model that takes images; others read the marker's path."""
    if len(raw) > MAX_IMAGE_BYTES:
        raise ToolError(
            f"{path} is a {mime} image over {MAX_IMAGE_BYTES // (1024 * 1024)} MB, "
            "too large to show to the model"
        )
    try:
        marker = save_image(raw, mime, ctx.home)
    except OSError as exc:
        raise ToolError(f"{path} is a {mime} image, but it could not be kept ({exc})") from None
    return f"{path} is a {mime} image ({len(raw):,} bytes).\n{marker}"


def check_window(offset: int, limit: int) -> int:
    """The first line to show: 0 means the first line too (small models send it for "from
    the start")."""
    if offset < 0 or limit < 1:
        raise ToolError("offset must be at least 0 and limit at least 1")
    return offset or 1


def number_lines(lines: Iterable[str], name: str, offset: int, limit: int) -> str:
    """What read_file shows of a file's lines: numbered "N|line", long lines cut, and a
    footer saying where the window ends (shared by every source of file text)."""
    shown: list[str] = []
    total = 0
    for total, line in enumerate(lines, start=1):
        if offset <= total < offset + limit:
            if len(line) > MAX_LINE_CHARS:
                line = f"{line[:MAX_LINE_CHARS]}... [{len(line) - MAX_LINE_CHARS} chars cut]"
            shown.append(f"{total}|{line}")
    if total == 0:
        return f"{name} is empty."
    if offset > total:
        raise ToolError(f"offset {offset} is past the end of {name} ({total} lines)")
    last = offset + len(shown) - 1
    if last < total:
        footer = (
            f"(lines {offset}-{last} of {total}; call read_file with offset={last + 1} "
            "to read more)"
        )
    else:
        footer = f"(lines {offset}-{last} of {total}; end of file)"
    return "\n".join([*shown, footer])


def write_checked(
    target: Path, ctx: ToolContext[Any], edit: Callable[[bytes | None], bytes]
) -> bool:
    """Write `edit(current bytes or None)` to the real file `target` names, if this call may
    write there (`check_write`); True when the file existed. The directory is opened without
    following links, so what was checked is where the bytes land."""
    real = Path(os.path.realpath(target))
    if real == Path("/"):
        raise ToolError(f"{target} is a directory")
    check_write(real, ctx)
    with path_lock(real), nofollow.directory(real.parent, create=True) as parent:
        data = edit(nofollow.read(parent, real.name, target))
        return nofollow.replace(parent, real.name, data, target)


def write_file(path: str, content: str, ctx: ToolContext) -> str:
    """Create or overwrite a file with `content`."""
    target = resolve_path(path, ctx.cwd)
    data = content.encode("utf-8")
    existed = write_checked(target, ctx, lambda _: data)
    return write_report(target, content, existed)


def write_report(target: Path, content: str, existed: bool) -> str:
    data_size = len(content.encode("utf-8"))
    lines = content.count("\n") + (1 if content and not content.endswith("\n") else 0)
    verb = "Overwrote" if existed else "Created"
    return f"{verb} {target}: {data_size} bytes, {lines} lines."


def _closest(text: str, old: str) -> str:
    """The lines of `text` most like `old`, numbered, to show where the model went wrong."""
    lines = text.splitlines()
    width = max(1, len(old.splitlines()))
    windows = [
        (start, "\n".join(lines[start : start + width]))
        for start in range(max(1, len(lines) - width + 1))
    ][:20_000]
    if not windows or not old.strip():
        return ""
    import difflib

    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(old)
    scored = []
    for start, window in windows:
        matcher.set_seq1(window)
        scored.append((matcher.quick_ratio(), start, window))
    best = max(
        sorted(scored, reverse=True)[:10],
        key=lambda item: difflib.SequenceMatcher(None, item[2], old).ratio(),
    )
    _, start, window = best
    numbered = "\n".join(f"{start + 1 + i}|{line}" for i, line in enumerate(window.splitlines()))
    return f"\nThe closest text in the file (lines {start + 1}-{start + width}):\n{numbered}"


def _match_lines(text: str, old: str) -> list[int]:
    return [text.count("\n", 0, m.start()) + 1 for m in re.finditer(re.escape(old), text)]


def patch(
    path: str, old_string: str, new_string: str, ctx: ToolContext, replace_all: bool = False
) -> str:
    """Replace `old_string` with `new_string` (exactly once unless replace_all)."""
    check_patch_strings(old_string, new_string)
    target = _existing_file(path, ctx.cwd)
    text = updated = ""
    count = 0

    def edit(data: bytes | None) -> bytes:
        nonlocal text, updated, count
        if data is None:
            raise _missing(target)
        _refuse_binary(target, data)
        text = data.decode("utf-8", errors="surrogateescape")
        updated, count = replace_text(text, old_string, new_string, replace_all, target)
        return updated.encode("utf-8", errors="surrogateescape")

    write_checked(target, ctx, edit)
    return patch_report(target, count, text, updated, ctx.cwd)


def check_patch_strings(old_string: str, new_string: str) -> None:
    if not old_string:
        raise ToolError("old_string is empty; use write_file to create or replace a whole file")
    if old_string == new_string:
        raise ToolError("old_string and new_string are the same; nothing to change")


def replace_text(
    text: str, old_string: str, new_string: str, replace_all: bool, target: Path
) -> tuple[str, int]:
    """`text` with the replacement made, and how many places changed; a ToolError that shows
    the closest text when `old_string` is not there, or the lines when it is not unique."""
    count = text.count(old_string)
    if count == 0:
        raise ToolError(
            f"old_string was not found in {target}; it must match exactly, "
            f"including whitespace and indentation.{_closest(text, old_string)}"
        )
    if count > 1 and not replace_all:
        where = ", ".join(map(str, _match_lines(text, old_string)[:10]))
        raise ToolError(
            f"old_string matches {count} places in {target} (lines {where}); include more "
            "surrounding lines to make it unique, or pass replace_all=true"
        )
    return text.replace(old_string, new_string, -1 if replace_all else 1), (
        count if replace_all else 1
    )


def patch_report(target: Path, count: int, before: str, after: str, cwd: Path) -> str:
    return f"Patched {target}: {count} replacement(s).\n" + _diff(before, after, target, cwd)


def _diff(before: str, after: str, path: Path, cwd: Path) -> str:
    import difflib

    name = os.path.relpath(path, cwd) if path.is_relative_to(cwd) else str(path)
    diff = "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=f"a/{name}",
            tofile=f"b/{name}",
        )
    )
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS] + f"\n... [{len(diff) - MAX_DIFF_CHARS} chars of diff cut]"
    return diff


def _display(path: Path, cwd: Path) -> str:
    return os.path.relpath(path, cwd) if path.is_relative_to(cwd) else str(path)


class _Secrets:
    """Which files a search leaves out (`talaria.tools.hidden_paths`): secrets, credential
    stores, the sandbox's hidden paths, and any file holding a private key. A file the search
    was pointed at, and whose reading the user approved, is the one exception."""

    def __init__(self, root: Path, ctx: ToolContext) -> None:
        from talaria.policy.secret_files import secret_reason

        self.home = ctx.home
        self.extra = ctx.sandbox.hidden_paths if ctx.sandbox is not None else ()
        self.approved = root if secret_reason(root, ctx.home) is not None else None
        self.seen: dict[str, bool] = {}

    def hides(self, path: Path) -> bool:
        from talaria.tools.hidden_paths import concealed

        return path != self.approved and concealed(path, self.home, self.extra)

    def leaves_out(self, path: Path) -> bool:
        """For a file a search found: hidden, or holding a private key (asked once per file)."""
        key = str(path)
        if key not in self.seen:
            self.seen[key] = self.hides(path) or _holds_a_key(path)
        return self.seen[key]


def _holds_a_key(path: Path) -> bool:
    from talaria.tools.hidden_paths import holds_a_key

    try:
        with open(path, "rb") as handle:
            return holds_a_key(handle.read(_SNIFF_BYTES))
    except OSError:
        return True


def _walk(root: Path, secrets: _Secrets) -> Iterator[Path]:
    """Files under `root` in a stable order, skipping hidden, vendored and secret places."""
    if secrets.hides(root):
        return
    if root.is_file():
        yield root
        return
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".") and d not in _SKIP_DIRS and not secrets.hides(Path(folder, d))
        )
        for name in sorted(files):
            if not secrets.hides(Path(folder, name)):
                yield Path(folder) / name


def _match(shown: str, number: int | str, text: str) -> str:
    """One search result; the text is redacted on its own, so the `path:line:` prefix cannot
    hide a `NAME=value` secret from the redaction."""
    from talaria.messages.redact import redact

    return f"{shown}:{number}:{redact(text)}"


def _grep_python(regex: re.Pattern[str], root: Path, ctx: ToolContext) -> list[str]:
    from talaria.tools.hidden_paths import holds_a_key

    found: list[str] = []
    for file in _walk(root, _Secrets(root, ctx)):
        if ctx.interrupt.is_set() or len(found) > MAX_MATCHES:
            break
        try:
            if file.stat().st_size > _MAX_SEARCH_BYTES:
                continue
            data = file.read_bytes()
        except OSError:
            continue
        if b"\0" in data[:_SNIFF_BYTES] or holds_a_key(data[:_SNIFF_BYTES]):
            continue
        shown = _display(file, ctx.cwd)
        for number, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            if regex.search(line):
                found.append(_match(shown, number, line[:MAX_MATCH_CHARS]))
    return found


def _grep_rg(rg: str, pattern: str, root: Path, ctx: ToolContext) -> list[str]:
    """ripgrep, read only as far as the cap (it respects .gitignore, which the fallback cannot);
    each hit's file is checked as the fallback checks it before its line is kept."""
    secrets = _Secrets(root, ctx)
    if secrets.hides(root):
        return []
    excluded = [*sorted(_SKIP_DIRS), *_SECRET_GLOBS]
    skipped = [argument for name in excluded for argument in ("--glob", f"!{name}")]
    command = [
        rg,
        "--line-number",
        "--with-filename",
        "--null",
        "--sort",
        "path",
        *skipped,
        "--no-heading",
        "--color",
        "never",
        "--max-columns",
        str(MAX_MATCH_CHARS),
        "--max-columns-preview",
        "-e",
        pattern,
        _display(root, ctx.cwd),
    ]
    proc = subprocess.Popen(
        command,
        cwd=ctx.cwd,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    found: list[str] = []
    for raw in proc.stdout:
        name, _, rest = raw.rstrip(b"\n").partition(b"\0")
        number, _, text = rest.decode("utf-8", "replace").partition(":")
        if secrets.leaves_out(ctx.cwd / os.fsdecode(name)):
            continue
        shown = name.decode("utf-8", "replace").removeprefix("./")
        found.append(_match(shown, number, text))
        if len(found) > MAX_MATCHES or ctx.interrupt.is_set():
            proc.kill()
            break
    errors = proc.stderr.read().decode("utf-8", "replace").strip()
    if proc.wait() == 2 and not found:
        raise ToolError(f"search failed: {errors}")
    return found


def _find_names(pattern: str, root: Path, ctx: ToolContext) -> list[str]:
    """Files whose name (or, for a pattern with '/', relative path) matches a glob; a plain
    word matches any name containing it."""
    glob = pattern if any(c in pattern for c in "*?[") else f"*{pattern}*"
    found: list[str] = []
    for file in _walk(root, _Secrets(root, ctx)):
        if ctx.interrupt.is_set() or len(found) > MAX_MATCHES:
            break
        subject = str(file.relative_to(root)) if "/" in glob else file.name
        if fnmatch.fnmatch(subject.lower(), glob.lower()):
            found.append(_display(file, ctx.cwd))
    return found


def ripgrep() -> str | None:
    """Where `rg` is, if installed (content searches use it; without it, a Python scan)."""
    import shutil  # with its archive modules, 7 ms: not at every start

    return shutil.which("rg")


def search_files(pattern: str, ctx: ToolContext, path: str = ".", target: str = "content") -> str:
    """Regex search in file contents, or a name search for files."""
    root = resolve_path(path, ctx.cwd)
    if not root.exists():
        raise _missing(root)
    if target == "files":
        found = _find_names(pattern, root, ctx)
    elif target == "content":
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"invalid regular expression {pattern!r}: {exc}") from None
        rg = ripgrep()
        found = _grep_rg(rg, pattern, root, ctx) if rg else _grep_python(regex, root, ctx)
    else:
        raise ToolError(f"target must be 'content' or 'files', not {target!r}")
    if not found and target == "files":
        return (
            f"No file names match {pattern!r} in {_display(root, ctx.cwd)} (target 'files' "
            "matches names; target 'content' searches inside the files)."
        )
    if not found:
        return f"No matches for {pattern!r} in {_display(root, ctx.cwd)}."
    if len(found) > MAX_MATCHES:
        return "\n".join(
            [
                *found[:MAX_MATCHES],
                f"(more than {MAX_MATCHES} matches; showing the first {MAX_MATCHES}. "
                "Narrow the pattern or the path.)",
            ]
        )
    return "\n".join(found)


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }


_PATH = {
    "type": "string",
    "description": "File path, relative to the working directory or absolute.",
}

READ_FILE_TOOL = Tool(
    name="read_file",
    description=(
        "Read a text file. Returns numbered lines as 'N|text', at most `limit` lines "
        f"(default {DEFAULT_LIMIT}) from line `offset` (1-based), and says how to read more. "
        "A PNG, JPEG, GIF or WebP image is shown to you as an image when you can see images."
    ),
    parameters=_schema(
        {
            "path": _PATH,
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "First line to show (1-based; 0 is the first line too).",
            },
            "limit": {"type": "integer", "minimum": 1, "description": "How many lines to show."},
        },
        ["path"],
    ),
    handler=read_file,
    toolset="file",
    context_param="ctx",
    retry_safe=True,
)
WRITE_FILE_TOOL = Tool(
    name="write_file",
    description="Create or overwrite a file with the given content (parent folders are "
    "created). To change part of a file prefer patch.",
    parameters=_schema(
        {
            "path": _PATH,
            "content": {"type": "string", "description": "The complete new file content."},
        },
        ["path", "content"],
    ),
    handler=write_file,
    toolset="file",
    context_param="ctx",
    retry_safe=True,
)
PATCH_TOOL = Tool(
    name="patch",
    description=(
        "Edit a file by replacing an exact string. old_string must match the file exactly "
        "(whitespace included) and only once, unless replace_all is true; include enough "
        "surrounding lines to make it unique. Returns a unified diff of the change."
    ),
    parameters=_schema(
        {
            "path": _PATH,
            "old_string": {"type": "string", "description": "The exact text to replace."},
            "new_string": {"type": "string", "description": "The text to put in its place."},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence."},
        },
        ["path", "old_string", "new_string"],
    ),
    handler=patch,
    toolset="file",
    context_param="ctx",
    precheck=lambda arguments: check_patch_strings(
        arguments["old_string"], arguments["new_string"]
    ),
)

SEARCH_FILES_TOOL = Tool(
    name="search_files",
    description=(
        "Search the working directory (or `path`). target='content' (default): regex search "
        "in file contents, results as 'path:line:text'. target='files': find files by name "
        "glob (e.g. '*.py', 'src/**/test_*.py'); a plain word matches names containing it. "
        f"At most {MAX_MATCHES} results; hidden and vendored directories are skipped."
    ),
    parameters=_schema(
        {
            "pattern": {"type": "string", "description": "Regex (content) or name glob (files)."},
            "path": {"type": "string", "description": "Directory or file to search (default '.')."},
            "target": {"type": "string", "enum": ["content", "files"]},
        },
        ["pattern"],
    ),
    handler=search_files,
    toolset="file",
    context_param="ctx",
    retry_safe=True,
)

FILE_TOOLS = [READ_FILE_TOOL, WRITE_FILE_TOOL, PATCH_TOOL, SEARCH_FILES_TOOL]
