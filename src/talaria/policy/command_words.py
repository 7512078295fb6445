"""The vocabulary the command rules share: findings, expanded words, option parsing, paths.

`command_safety` reads the shell; the rule modules (`command_rules`, `rules_code`,
`rules_files`, `rules_system`) judge one simple command each and speak in these terms.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from talaria.policy.command_safety import Scanner

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh"})
INTERPRETER = re.compile(
    r"(python|pypy)[\d.]*|perl|ruby|node|nodejs|php|lua|luajit|deno|bun|Rscript|julia|pwsh"
)
PROTECTED_DIRS = frozenset(
    {
        "/",
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/home",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/media",
        "/mnt",
        "/opt",
        "/proc",
        "/root",
        "/run",
        "/sbin",
        "/snap",
        "/srv",
        "/sys",
        "/usr",
        "/var",
        "/usr/bin",
        "/usr/sbin",
        "/usr/lib",
        "/usr/lib64",
        "/usr/local",
        "/usr/share",
        "/usr/include",
        "/var/lib",
        "/var/log",
        "/System",
        "/Library",
        "/Applications",
        "/Users",
        "/private",
    }
)
"""Deleting (or chmod -R-ing) one of these, or its whole content, is never approvable."""
LISTING_FLAGS = frozenset({"-l", "--list", "-L", "--help", "-h", "-V", "--version", "-v"})
"""Flags that make a dangerous program only print something (`killall -l`, `mkfs --help`)."""


class Finding(NamedTuple):
    reason: str
    pattern: str
    blocked: bool = False
    """The floor: never allowed, in any mode."""
    unresolved: bool = False
    """A floor-class action (a recursive delete, a kill) whose target is known only at run
    time: contained by the sandbox, but with no sandbox it could be the home or every
    process, so it never runs unconfined without a human's yes."""


class Arg(str):
    """A word after expansion; `fetched` marks text produced by a download or decode
    (`"$(curl ...)"`, `<(wget -O- ...)`), which must never be run as code unreviewed."""

    fetched: bool = False
    dynamic: bool = False
    """Part of the word is computed at run time (an unknown variable, a substitution whose
    output cannot be known, the words xargs reads): never treated as a known path."""


def computed(text: str) -> Arg:
    """A word known only at run time (what xargs reads, the path find hands `-exec`)."""
    arg = Arg(text)
    arg.dynamic = True
    return arg


@dataclass
class ScanContext:
    """What the whole command line shares, nested code included."""

    base: str | None = None
    """The directory the command runs in (None: unknown, relative paths cannot be read)."""
    talaria_home: Path | None = None
    written: dict[str, str] = field(default_factory=dict)
    """Files this line writes before it may run them, with the text written (`echo ... > f`)."""
    downloaded: set[str] = field(default_factory=set)
    """Files this line downloads (`curl -o f URL`): running them runs unseen code."""
    rewritten: set[str] = field(default_factory=set)
    """Files this line changes in ways that cannot be read ahead (`cp x f`, `sed -i ... f`):
    what is on disk now is not what would run."""
    executable: set[str] = field(default_factory=set)
    """Files this line makes executable (`chmod +x f`): running one then asks."""
    unknown: list[str] = field(default_factory=list)
    """What this line does that is not known to be harmless (a program outside the read-only
    table, a write to a file): quiet inside the sandbox, asked about without one."""
    functions: dict[str, str] = field(default_factory=dict)
    """Shell functions and aliases the line defines, by name, with their bodies."""
    calling: set[str] = field(default_factory=set)
    """The functions whose bodies are being judged for a call right now."""


Rule = Callable[[list[Arg], "Scanner"], list[Finding]]

FETCHED_CODE = Finding("runs downloaded or decoded code through an interpreter", "curl|sh")


def program_name(word: str) -> str:
    """`/usr/bin/rm` and `./rm` are `rm`."""
    return word.rsplit("/", 1)[-1] if "/" in word.rstrip("/") else word


def short_flags(args: list[Arg]) -> str:
    """All letters of short option clusters before `--` (`-rf -v` -> "rfv")."""
    letters = []
    for a in args:
        if a == "--":
            break
        if a.startswith("-") and not a.startswith("--"):
            letters.append(a[1:])
    return "".join(letters)


def operands(args: list[Arg]) -> list[Arg]:
    """The non-option arguments (everything after `--` counts)."""
    out, options_done = [], False
    for a in args:
        if options_done or not a.startswith("-") or a == "-":
            out.append(a)
        elif a == "--":
            options_done = True
    return out


def option_value(argv: list[Arg], *names: str) -> Arg | None:
    """The value of `-o X`, `-oX`, `--output X` or `--output=X` (the last one given)."""
    found = None
    for i, a in enumerate(argv[1:], 1):
        for name in names:
            if a == name and i + 1 < len(argv):
                found = argv[i + 1]
            elif name.startswith("--") and a.startswith(name + "="):
                found = Arg(a.partition("=")[2])
            elif len(name) != 2 or name.startswith("--") or a.startswith("--"):
                continue
            elif a.startswith("-") and a.endswith(name[1]) and a != name and i + 1 < len(argv):
                found = argv[i + 1]  # a cluster ending in the option: curl -sSLo FILE
            elif a.startswith(name) and a != name:
                found = Arg(a[2:])
    return found


def only_lists(argv: list[Arg]) -> bool:
    """`killall -l`, `mkfs.ext4 -V`: a listing or help flag and nothing else to act on."""
    args = argv[1:]
    return bool(args) and all(a in LISTING_FLAGS for a in args)


def shell_payload(argv: list[Arg]) -> tuple[Arg | None, Arg | None, bool]:
    """(the -c code, the script path, reads-stdin flag -s) of a shell invocation."""
    command_mode, stdin_mode, i = False, False, 1
    while i < len(argv):
        a = argv[i]
        if a in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
            continue
        if a == "--":
            i += 1
            break
        if a.startswith(("-", "+")) and len(a) > 1:
            if not a.startswith("--"):
                command_mode = command_mode or "c" in a
                stdin_mode = stdin_mode or "s" in a
            i += 1
            continue
        break
    nxt = argv[i] if i < len(argv) else None
    return (nxt, None, stdin_mode) if command_mode else (None, nxt, stdin_mode)


def absolute(target: str, sc: Scanner) -> str | None:
    """`target` as an absolute path, from the line's `cd` or the command's directory."""
    path = os.path.expanduser(target)
    if path.startswith("/"):
        return os.path.normpath(path)
    base = sc.cwd or sc.ctx.base
    return os.path.normpath(os.path.join(base, path)) if base else None


def read_text(target: str, sc: Scanner, limit: int = 1_000_000) -> str | None:
    """The text of the regular file `target` names (None when it cannot be read). Devices,
    pipes and FIFOs are never opened: `cat /dev/urandom` or a FIFO would stall the check."""
    path = absolute(target, sc)
    if path is None or not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read(limit)
    except OSError:
        return None


def protected(target: str, cwd: str | None) -> bool:
    """Is `target` (or everything in it) the root, a system directory or the home?"""
    expanded = os.path.join(cwd or "", os.path.expanduser(target))
    if not expanded.startswith("/"):
        return False
    protected_dirs = PROTECTED_DIRS | {os.path.normpath(os.path.expanduser("~"))}
    path = re.sub("^/+", "/", expanded)
    base = (path[:-2] or "/") if path.endswith(("/*", "/.")) else path
    if os.path.normpath(base) in protected_dirs:
        return True
    return any(c in path for c in "*?[") and any(fnmatch.fnmatch(p, path) for p in protected_dirs)


def top_level(target: str, cwd: str | None) -> bool:
    """The root, the home, or a top-level system directory such as /etc (not /var/log)."""
    path = os.path.normpath(os.path.join(cwd or "", os.path.expanduser(target)))
    home = os.path.normpath(os.path.expanduser("~"))
    return path in ("/", home) or (path.count("/") == 1 and path in PROTECTED_DIRS)
