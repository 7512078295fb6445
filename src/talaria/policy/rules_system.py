"""Rules for the machine itself: disks, databases, processes.

Wiping or reformatting a disk is the floor. Database clients are judged by the SQL they are
handed (arguments, heredocs, here-strings, `-f` files, `<` files and piped `echo`), not by
words elsewhere in the line. Killing processes chosen at run time (`kill $(pgrep x)`,
`pgrep x | xargs kill`) asks, as does killing by name; listing signals does not.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from talaria.policy.command_words import (
    Arg,
    Finding,
    only_lists,
    operands,
    option_value,
    program_name,
    read_text,
    short_flags,
)
from talaria.tools.sensitive_paths import is_block_device

if TYPE_CHECKING:
    from talaria.policy.command_safety import Scanner

_SQL_DANGER = re.compile(
    r"\b(drop\s+(database|schema|table|view|index|user|role|owned|keyspace|collection)"
    r"|truncate\b|flushall|flushdb|alter\s+table\s+\S+\s+drop"
    r"|delete\s+from\s+[\w.\"`\[\]]+\s*(;|$|\"|'))"
    r"|\.drop\(\s*\)|dropDatabase\s*\(|\.(deleteMany|remove)\(\s*\{\s*\}\s*\)",
    re.I,
)
DB_CLIENTS = frozenset(
    {
        "psql",
        "mysql",
        "mariadb",
        "sqlite3",
        "clickhouse-client",
        "clickhouse",
        "mongo",
        "mongosh",
        "redis-cli",
        "cqlsh",
        "sqlcmd",
        "duckdb",
        "usql",
        "cockroach",
    }
)
_SQL_FILE_OPTIONS = ("-f", "--file", "--init")
_WIPE = "destroys everything on a disk"
_PARTITION = "rewrites a disk's partition table or volumes"


def sql_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """The SQL a client is given, wherever it comes from."""
    texts: list[str | None] = [str(a) for a in argv[1:]]
    command = sc.command
    if command is not None:
        texts += [command.heredoc] if command.heredoc else []
        texts += [" ".join(sc.expand(t)) for op, t in command.redirects if op == "<<<"]
        texts += [read_text(" ".join(sc.expand(t)), sc) for op, t in command.redirects if op == "<"]
    script = option_value(argv, *_SQL_FILE_OPTIONS)
    if script is not None:
        texts.append(read_text(script, sc))
    texts += [read_text(a[6:], sc) for a in argv if a.startswith(".read ")]
    texts += sc.piped_text
    hit = any(text and _SQL_DANGER.search(text) for text in texts)
    return [Finding("drops, empties or deletes database data", "sql drop")] if hit else []


def kill_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    if only_lists(argv):
        return []
    found = _kill_signal(argv)
    if len(argv) > 2 and argv[-1] == "-1":
        return [Finding("kills every process it may signal", "kill all"), *found]
    targets, i = [], 1
    while i < len(argv):
        a = argv[i]
        i += 2 if a in ("-s", "-n", "--signal") else 1
        if not a.startswith("-") or (a.lstrip("-").isdigit() and argv[i - 2 : i - 1] == ["--"]):
            targets.append(a)
    pids = [t for t in targets if not t.startswith("%")]
    if (not targets) or any(not t.lstrip("-").isdigit() for t in pids):
        found.append(Finding("kills processes chosen at run time", "kill by pid list"))
    return found


def _kill_signal(argv: list[Arg]) -> list[Finding]:
    kill_signals = {"9", "KILL", "SIGKILL"}
    for i, a in enumerate(argv[1:], 1):
        value = argv[i + 1] if a in ("-s", "-n", "--signal") and i + 1 < len(argv) else a[1:]
        if a.startswith("--signal="):
            value = a.partition("=")[2]
        if a.startswith("-") and value.upper() in kill_signals:
            return [Finding("kills processes without letting them clean up", "kill -9")]
    return []


def kill_by_name(argv: list[Arg], sc: Scanner) -> list[Finding]:
    name = program_name(argv[0])
    return [] if only_lists(argv) else [Finding("kills processes by name", name)]


def wipe_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """mkfs, wipefs, blkdiscard: the floor (their --help and -V are fine)."""
    return [] if only_lists(argv) else [Finding(_WIPE, "mkfs", blocked=True)]


def shred_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    if any(is_block_device(a) for a in operands(argv[1:])):
        return [Finding(_WIPE, "mkfs", blocked=True)]
    return [Finding("destroys file contents beyond recovery", "shred")]


def partition_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """Partition editors ask; zapping every table at once (`sgdisk -Z`) is the floor."""
    if only_lists(argv):
        return []
    zap = (
        "--zap-all" in argv
        or "--clear" in argv
        or (program_name(argv[0]) == "sgdisk" and any(c in short_flags(argv[1:]) for c in "Zo"))
    )
    if zap:
        return [Finding(_WIPE, "mkfs", blocked=True)]
    return [Finding(_PARTITION, "partition disk")]


def device_erase_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`nvme format`, `hdparm --security-erase`, `cryptsetup luksFormat`: the floor."""
    words = set(argv[1:])
    erase = {"format", "sanitize", "--security-erase", "--security-erase-enhanced"}
    erase |= {"luksFormat", "erase", "luksErase", "--trim-sector-range"}
    return [Finding(_WIPE, "mkfs", blocked=True)] if words & erase else []


def volume_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """LVM, ZFS and RAID removals ask."""
    name, positionals = program_name(argv[0]), operands(argv[1:])
    destroying = name in ("lvremove", "vgremove", "pvremove") or (
        positionals[:1] in (["destroy"], ["labelclear"])
    )
    destroying = destroying or "--zero-superblock" in argv or (name == "badblocks" and "-w" in argv)
    return [Finding(_PARTITION, "partition disk")] if destroying else []
