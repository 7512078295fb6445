"""The rules: which programs, with which arguments, need approval or are blocked outright.

`command_safety` reads the shell and hands each simple command (expanded, wrappers stripped)
to the rule registered for its program name here. A rule returns findings; an empty list
means the program is harmless with those arguments.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from talaria.tools.sensitive_paths import classify_write, is_block_device

if TYPE_CHECKING:
    from talaria.tools.command_safety import Scanner

_SQL_DANGER = re.compile(
    r"\b(drop\s+(database|schema|table)|truncate\b|flushall|flushdb|dropDatabase\s*\()", re.I
)
_PROTECTED_DIRS = frozenset(
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

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh"})
INTERPRETER = re.compile(r"(python|pypy)[\d.]*|perl|ruby|node|nodejs|php|lua|deno|bun")
_DB_CLIENTS = frozenset(
    {
        "psql",
        "mysql",
        "mariadb",
        "sqlite3",
        "clickhouse-client",
        "mongo",
        "mongosh",
        "redis-cli",
        "cqlsh",
        "sqlcmd",
        "duckdb",
    }
)


class Finding(NamedTuple):
    reason: str
    pattern: str
    blocked: bool = False


class Arg(str):
    """A word after expansion; `fetched` marks text produced by a download or decode
    (`"$(curl ...)"`, `<(wget -O- ...)`), which must never be run as code unreviewed."""

    fetched: bool = False


Rule = Callable[[list[Arg], "Scanner"], list[Finding]]


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


FETCHED_CODE = Finding("runs downloaded or decoded code through an interpreter", "curl|sh")


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


def _protected(target: str, cwd: str | None) -> bool:
    """Is `target` (or everything in it) the root, a system directory or the home?"""
    expanded = os.path.join(cwd or "", os.path.expanduser(target))
    if not expanded.startswith("/"):
        return False
    protected = _PROTECTED_DIRS | {os.path.normpath(os.path.expanduser("~"))}
    path = re.sub("^/+", "/", expanded)
    base = (path[:-2] or "/") if path.endswith(("/*", "/.")) else path
    if os.path.normpath(base) in protected:
        return True
    return any(c in path for c in "*?[") and any(fnmatch.fnmatch(p, path) for p in protected)


def _top_level(target: str, cwd: str | None) -> bool:
    """The root, the home, or a top-level system directory such as /etc (not /var/log)."""
    path = os.path.normpath(os.path.join(cwd or "", os.path.expanduser(target)))
    home = os.path.normpath(os.path.expanduser("~"))
    return path in ("/", home) or (path.count("/") == 1 and path in _PROTECTED_DIRS)


def _cd(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """Follow `cd` so that `cd / && rm -rf *` is seen for what it is."""
    target = (operands(argv[1:]) or [Arg("~")])[0]
    known = target != "-" and "$" not in target
    path = os.path.join(sc.cwd or "", os.path.expanduser(target)) if known else ""
    sc.cwd = os.path.normpath(path) if path.startswith("/") else None
    return []


def rm_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    flags = short_flags(argv[1:])
    recursive = "r" in flags.lower() or "--recursive" in argv
    force = "f" in flags or "--force" in argv
    targets = operands(argv[1:])
    hits_protected = any(_protected(t, sc.cwd) for t in targets)
    if recursive and ("--no-preserve-root" in argv or hits_protected):
        return [Finding("deletes the root, a system or a home directory", "rm -r /", True)]
    if recursive:
        return [Finding("deletes files recursively", "rm -r")]
    return [Finding("force-deletes files", "rm -f")] if force else []


def write_target(text: str) -> list[Finding]:
    if not text or "$" in text or text.isdigit() or text == "-":
        return []
    path = os.path.expanduser(text)
    if not path.startswith("/"):
        return []
    if is_block_device(path):
        return [Finding(f"overwrites the disk device {path}", "write to disk", blocked=True)]
    verdict = classify_write(Path(path))
    return [Finding(*verdict)] if verdict else []


def _dd(argv: list[Arg], sc: Scanner) -> list[Finding]:
    return [f for a in argv[1:] if a.startswith("of=") for f in write_target(a[3:])]


def _shell(argv: list[Arg], sc: Scanner) -> list[Finding]:
    code, script, _ = shell_payload(argv)
    found = sc.nested(code) if code is not None else []
    if (code is not None and code.fetched) or (script is not None and script.fetched):
        found.append(FETCHED_CODE)
    return found


_RUNS_SHELL = re.compile(r"\b(system|popen|subprocess|spawn\w*|exec\w*|check_output|check_call)\b")
_STRING_LITERAL = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")
_LIST_LITERAL = re.compile(r"\[([^\]]*)\]")
_RMTREE = re.compile(r"\brmtree\s*\(\s*(?:r?['\"]([^'\"]*)['\"]|(os\.path\.expanduser|Path\.home))")


def _inline_code(code: Arg, sc: Scanner) -> list[Finding]:
    """`python -c CODE`: shell commands in its strings when it runs a shell, and rmtree."""
    found = [FETCHED_CODE] if code.fetched else []
    if _RUNS_SHELL.search(code):
        for m in _STRING_LITERAL.finditer(code):
            found += sc.nested(m.group(1) if m.group(1) is not None else m.group(2))
        for m in _LIST_LITERAL.finditer(code):  # subprocess.run(["rm", "-rf", "/"])
            words = [a or b for a, b in _STRING_LITERAL.findall(m.group(1))]
            found += sc.nested(shlex.join(words)) if words else []
    for m in _RMTREE.finditer(code):
        if m.group(2) or _protected(m.group(1), sc.cwd):
            found.append(Finding("deletes the root, a system or a home directory", "rm -r /", True))
        else:
            found.append(Finding("deletes files recursively", "rm -r"))
    return found


def _interpreter(argv: list[Arg], sc: Scanner) -> list[Finding]:
    for i, a in enumerate(argv[1:], 1):
        if a in ("-c", "-e", "-E", "-r"):
            return _inline_code(argv[i + 1], sc) if i + 1 < len(argv) else []
        if a == "-m":
            module = argv[i + 1 :]
            return _packages(module, sc) if module[:1] == ["pip"] else []
        if not a.startswith("-"):
            return [FETCHED_CODE] if a.fetched else []
    return []


def _eval(argv: list[Arg], sc: Scanner) -> list[Finding]:
    found = sc.nested(" ".join(argv[1:]))
    return [*found, FETCHED_CODE] if any(a.fetched for a in argv[1:]) else found


def _source(argv: list[Arg], sc: Scanner) -> list[Finding]:
    return [FETCHED_CODE] if any(a.fetched for a in argv[1:]) else []


def _su(argv: list[Arg], sc: Scanner) -> list[Finding]:
    found = [Finding("runs as another user through su", "sudo")]
    for i, a in enumerate(argv[1:], 1):
        if a in ("-c", "--command") and i + 1 < len(argv):
            found += sc.nested(argv[i + 1])
        elif a.startswith("--command="):
            found += sc.nested(a.partition("=")[2])
    return found


_SSH_VALUE_OPTIONS = frozenset("bcDEeFIiJLlmOopQRSWw")


def _ssh(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`ssh host CMD...` runs CMD in the remote shell: check it like a local one."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        takes_value = len(argv[i]) == 2 and argv[i][1] in _SSH_VALUE_OPTIONS
        i += 2 if takes_value else 1
    remote = argv[i + 1 :]
    return sc.nested(" ".join(remote)) if remote else []


def _find(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """-delete and -exec rm below the root or a system directory are the hard floor."""
    found, i = [], 1
    while i < len(argv) and not argv[i].startswith(("-", "(", "!")):
        i += 1
    whole_system = any(_top_level(start, sc.cwd) for start in argv[1:i])
    while i < len(argv):
        if argv[i] == "-delete":
            found.append(Finding("deletes every file find matches", "find -delete"))
        if argv[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(argv) and argv[end] not in (";", "+"):
                end += 1
            inner = argv[i + 1 : end]
            found += sc.check(inner)
            if inner and program_name(inner[0]) in ("rm", "shred"):
                found.append(Finding("deletes every file find matches", "find -delete"))
            i = end
        i += 1
    if whole_system and found:
        return [Finding("deletes files across a system directory", "find / -delete", True)]
    return found


def _git(argv: list[Arg], sc: Scanner) -> list[Finding]:
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") else 1
    sub, rest = (argv[i] if i < len(argv) else ""), argv[i + 1 :]
    flags = short_flags(rest)
    if sub == "push" and (
        "f" in flags
        or any(a.startswith(("--force", "--mirror")) or a.startswith("+") for a in rest)
    ):
        return [Finding("rewrites history on the remote", "git push --force")]
    if sub == "reset" and "--hard" in rest:
        return [Finding("discards uncommitted changes", "git reset --hard")]
    if sub == "clean" and ("f" in flags or "--force" in rest):
        return [Finding("deletes untracked files", "git clean -f")]
    if sub == "branch" and ("D" in flags or ("--delete" in rest and "--force" in rest)):
        return [Finding("deletes a branch that may not be merged", "git branch -D")]
    return []


def _chmod(argv: list[Arg], sc: Scanner) -> list[Finding]:
    positionals = operands(argv[1:])
    if "R" not in short_flags(argv[1:]) and "--recursive" not in argv:
        return []
    if any(_protected(t, sc.cwd) for t in positionals[1:]):
        return [Finding("changes permissions of a whole system directory", "chmod -R /", True)]
    world = {"777", "0777", "666", "0666", "a+rwx", "ugo+rwx", "o+w", "a+w", "o+rwx"}
    if positionals[:1] and positionals[0] in world:
        return [Finding("makes files writable by everyone", "chmod -R 777")]
    return []


def _chown(argv: list[Arg], sc: Scanner) -> list[Finding]:
    if "R" not in short_flags(argv[1:]) and "--recursive" not in argv:
        return []
    if any(_protected(t, sc.cwd) for t in operands(argv[1:])[1:]):
        return [Finding("changes the owner of a whole system directory", "chown -R /", True)]
    return [Finding("changes file owners recursively", "chown -R")]


def _kill(argv: list[Arg], sc: Scanner) -> list[Finding]:
    kill_signals = {"9", "KILL", "SIGKILL"}
    for i, a in enumerate(argv[1:], 1):
        value = argv[i + 1] if a in ("-s", "-n", "--signal") and i + 1 < len(argv) else a[1:]
        if a.startswith("--signal="):
            value = a.partition("=")[2]
        if a.startswith("-") and value.upper() in kill_signals:
            return [Finding("kills processes without letting them clean up", "kill -9")]
    return []


def _named(pattern: str, reason: str) -> Rule:
    return lambda argv, sc: [Finding(reason, pattern)]


def _blocked(pattern: str, reason: str) -> Rule:
    return lambda argv, sc: [Finding(reason, pattern, blocked=True)]


def _when_arg(pattern: str, reason: str, *triggers: str) -> Rule:
    """A finding when any argument (or a short option letter) is one of `triggers`."""

    def rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
        letters = short_flags(argv[1:])
        hit = any(
            t in argv[1:] or (len(t) == 2 and t[0] == "-" and t[1] in letters) for t in triggers
        )
        return [Finding(reason, pattern)] if hit else []

    return rule


def _first_positional(pattern: str, reason: str, *subcommands: str, blocked: bool = False) -> Rule:
    def rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
        positionals = operands(argv[1:])
        hit = bool(positionals) and positionals[0] in subcommands
        return [Finding(reason, pattern, blocked)] if hit else []

    return rule


_REMOVAL = "removes installed packages"
_REMOVERS: dict[str, tuple[str, ...]] = {
    "apt": ("remove", "purge", "autoremove", "autopurge"),
    "apt-get": ("remove", "purge", "autoremove"),
    "aptitude": ("remove", "purge"),
    "dnf": ("remove", "erase", "autoremove"),
    "yum": ("remove", "erase", "autoremove"),
    "zypper": ("remove", "rm"),
    "brew": ("uninstall", "remove", "rm"),
    "snap": ("remove",),
    "apk": ("del",),
    "conda": ("remove", "uninstall"),
    "mamba": ("remove", "uninstall"),
    "port": ("uninstall",),
}


def _packages(argv: list[Arg], sc: Scanner) -> list[Finding]:
    name, positionals = program_name(argv[0]), operands(argv[1:])
    if name in ("pip", "pip3", "uv") or name.startswith("pip3."):
        args = positionals[1:] if name == "uv" and positionals[:1] == ["pip"] else positionals
        unattended = "-y" in argv or "--yes" in argv or name == "uv"
        hit = args[:1] == ["uninstall"] and unattended
        return [Finding("uninstalls Python packages", "pip uninstall")] if hit else []
    if name == "pacman":
        hit = any(a.startswith("-R") or a == "--remove" for a in argv[1:])
    elif name == "dpkg":
        hit = any(a in ("-r", "-P", "--remove", "--purge") for a in argv[1:])
    else:
        hit = bool(positionals) and positionals[0] in _REMOVERS.get(name, ())
    return [Finding(_REMOVAL, "package removal")] if hit else []


def _docker(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`docker system prune` / `docker volume prune` delete data other projects rely on."""
    positionals = operands(argv[1:])
    if positionals[:2] in (["system", "prune"], ["volume", "prune"]):
        return [Finding("deletes containers, images or volumes", "docker prune")]
    return []


def _sql(argv: list[Arg], sc: Scanner) -> list[Finding]:
    hit = _SQL_DANGER.search(sc.src) is not None
    return [Finding("drops or empties database objects", "sql drop")] if hit else []


def _writes(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """tee FILE..., sed -i FILE...: every file argument is written."""
    name = program_name(argv[0])
    if name == "sed" and not (
        re.search(r"(^|\s)-[a-zA-Z]*i", " ".join(argv[1:]))
        or any(a.startswith("--in-place") for a in argv)
    ):
        return []
    return [f for a in operands(argv[1:]) for f in write_target(a)]


def _copies(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """cp/mv/install/ln SRC... DEST: the destination is written."""
    for i, a in enumerate(argv[1:], 1):
        if a in ("-t", "--target-directory") and i + 1 < len(argv):
            return write_target(argv[i + 1])
        if a.startswith("--target-directory="):
            return write_target(a.partition("=")[2])
    positionals = operands(argv[1:])
    return write_target(positionals[-1]) if len(positionals) >= 2 else []


_POWER = "turns the machine off or restarts it"
_RULES: dict[str, Rule] = {
    "rm": rm_rule,
    "dd": _dd,
    "git": _git,
    "chmod": _chmod,
    "chown": _chown,
    "chgrp": _chown,
    "kill": _kill,
    "find": _find,
    "ssh": _ssh,
    "cd": _cd,
    "eval": _eval,
    "source": _source,
    ".": _source,
    "su": _su,
    "tee": _writes,
    "sed": _writes,
    "cp": _copies,
    "mv": _copies,
    "install": _copies,
    "ln": _copies,
    "docker": _docker,
    "podman": _docker,
    "pkill": _named("pkill", "kills processes by name"),
    "killall": _named("killall", "kills processes by name"),
    "shred": _named("shred", "destroys file contents beyond recovery"),
    "dropdb": _named("sql drop", "drops a database"),
    "mysqladmin": _first_positional("sql drop", "drops a database", "drop"),
    "crontab": _when_arg("crontab -r", "deletes every cron job", "-r"),
    "iptables": _when_arg("firewall flush", "removes every firewall rule", "-F", "--flush"),
    "ip6tables": _when_arg("firewall flush", "removes every firewall rule", "-F", "--flush"),
    "nft": _when_arg("firewall flush", "removes every firewall rule", "flush"),
    "ufw": _first_positional("firewall flush", "turns the firewall off", "disable", "reset"),
    "history": _when_arg("history -c", "erases the shell history", "-c"),
    "systemctl": _first_positional(
        "systemctl reboot",
        _POWER,
        "poweroff",
        "reboot",
        "halt",
        "kexec",
        "soft-reboot",
        blocked=True,
    ),
    "init": _first_positional("shutdown", _POWER, "0", "6", blocked=True),
    "telinit": _first_positional("shutdown", _POWER, "0", "6", blocked=True),
}
for _name in ("shutdown", "reboot", "halt", "poweroff"):
    _RULES[_name] = _blocked("shutdown", _POWER)
for _name in ("mkfs", "mke2fs", "mkswap", "wipefs"):
    _RULES[_name] = _blocked("mkfs", "formats a disk, destroying its data")
for _name in ("fdisk", "sfdisk", "parted", "gdisk", "sgdisk", "cfdisk"):
    _RULES[_name] = _named("partition disk", "rewrites a disk's partition table")
for _name in (*_REMOVERS, "pacman", "dpkg", "pip", "pip3", "uv"):
    _RULES[_name] = _packages


def rule_for(name: str) -> Rule | None:
    if name in _RULES:
        return _RULES[name]
    if name in SHELLS:
        return _shell
    if name in _DB_CLIENTS:
        return _sql
    if name.startswith(("mkfs.", "mkfs_")):
        return _RULES["mkfs"]
    if name.startswith("pip3."):
        return _packages
    return _interpreter if INTERPRETER.fullmatch(name) else None
