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
from talaria.policy.rules_code import opaque, stdin_texts
from talaria.policy.sensitive_paths import is_block_device

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
_SHELL_ESCAPE = re.compile(
    r"\\!\s*(.*)$|^\s*\.(?:shell|system)\s+(.*)$|^\s*system\s+(.*)$"
    r"|(?:\\[ogw]|^\s*\.(?:output|once|read))\s*['\"]?\|(.*?)['\"]?\s*$"
    r"|^\s*\.import\s+['\"]?\|([^'\"]*)|^\s*(?:pager|\\P)\s+(.+)$",
    re.M | re.I,
)
"""psql `\\! cmd`, `\\o |cmd`; sqlite3 `.shell`, `.system`, `.output |cmd`, `.import '|cmd'`;
mysql `system cmd`, `\\! cmd`, `pager cmd`: the client runs cmd through the shell."""
_SERVER_PROGRAM = re.compile(r"\b(?:to|from)\s+program\s+'((?:[^']|'')*)'", re.I)
"""PostgreSQL's `COPY ... TO PROGRAM 'cmd'` runs cmd on the server, as its user."""
_LOADS_CODE = re.compile(r"^\s*\.load\b|\bload_extension\s*\(|^\s*\\e[fv]?\b", re.M | re.I)
_WIPE = "destroys everything on a disk"
_PARTITION = "rewrites a disk's partition table or volumes"


def sql_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """The SQL a client is given, wherever it comes from, and the client's own escapes to
    the shell (`\\! cmd`, `.shell cmd`, `system cmd`, `COPY ... TO PROGRAM 'cmd'`)."""
    piped, unknown = stdin_texts(sc)
    texts: list[str | None] = [*(str(a) for a in argv[1:]), *piped]
    for option in (*_SQL_FILE_OPTIONS, "-init"):
        script = option_value(argv, option)
        texts += [read_text(script, sc)] if script is not None else []
    texts += [read_text(a[6:], sc) for a in argv if a.startswith(".read ")]
    known = [text for text in texts if text]
    found = [Finding("drops, empties or deletes database data", "sql drop")]
    found = found if any(_SQL_DANGER.search(text) for text in known) else []
    if unknown:
        found.append(opaque("database commands from input that cannot be read"))
    for pager in _values_of(argv, "--pager"):
        found += sc.nested(pager)
    return found + [f for text in known for f in _client_escapes(text, sc)]


def _values_of(argv: list[Arg], option: str) -> list[str]:
    return [a.partition("=")[2] for a in argv[1:] if a.startswith(option + "=")]


def _client_escapes(text: str, sc: Scanner) -> list[Finding]:
    found: list[Finding] = []
    for m in _SHELL_ESCAPE.finditer(text):
        found += sc.nested(next(g for g in m.groups() if g is not None))
    for m in _SERVER_PROGRAM.finditer(text):
        reason = "runs a program on the database server, outside any sandbox"
        found += [*sc.nested(m.group(1)), Finding(reason, "sql program")]
    if _LOADS_CODE.search(text):
        found.append(opaque("a database extension or editor it loads"))
    return found


_SIGNAL_OPTIONS = ("-s", "-n", "--signal")
_KILL_SIGNALS = frozenset({"9", "KILL"})
_EVERY_PROCESS = "kills every process it may signal"


def _kill_arguments(argv: list[Arg]) -> tuple[str, list[Arg]]:
    """(the signal, the targets) of `kill`: `-9`, `-KILL`, `-s KILL`, `-n 9`, `--signal=9`;
    after `--` or the signal, `-1` and `-PGID` are targets. A lone `kill -1` counts `-1` as
    both, so it is never read as harmless."""
    signal, targets, options = "TERM", list[Arg](), True
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--" and options:
            options = False
        elif options and a in _SIGNAL_OPTIONS and i + 1 < len(argv):
            signal, options = argv[i + 1], False
            i += 1
        elif options and a.startswith("--signal="):
            signal, options = a.partition("=")[2], False
        elif options and a.startswith("-") and len(a) > 1:
            signal, options = a[1:], False
            if i == len(argv) - 1:
                targets.append(a)  # `kill -1`: read as the every-process target too
        else:
            targets.append(a)
        i += 1
    upper = signal.upper()
    return upper[3:] if upper.startswith("SIG") else upper, targets


def _pid(word: Arg) -> int | None:
    """The number a kill target names, if it is one (`-01` is -1)."""
    try:
        return None if word.dynamic else int(word, 10)
    except ValueError:
        return None


def kill_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """Signalling every process (`kill -9 -1`, `kill -- -1`) or init (`kill 1`) is the
    floor; killing processes chosen at run time asks, and never runs unattended without a
    sandbox; signal 0 only asks whether a process exists."""
    if only_lists(argv) or any(a in ("-l", "-L", "--list", "--table") for a in argv[1:]):
        return []
    signal, targets = _kill_arguments(argv)
    numbers = {t: _pid(t) for t in targets if not t.startswith("%")}
    if signal != "0" and any(n in (-1, 1) for n in numbers.values()):
        return [Finding(_EVERY_PROCESS, "kill all", blocked=True)]
    found = []
    if signal in _KILL_SIGNALS:
        found.append(Finding("kills processes without letting them clean up", "kill -9"))
    if not targets or None in numbers.values():
        reason = "kills processes chosen at run time"
        found.append(Finding(reason, "kill by pid list", unresolved=bool(targets)))
    return found


_EVERYTHING = frozenset({"", ".", ".*", "^", "^.*", ".*$", "^.*$", ".+", "^.+"})
_SELECTORS = {
    "pkill": frozenset(
        {"-u", "-U", "-g", "-G", "-P", "-s", "-t", "--euid", "--uid", "--pgroup", "--group"}
        | {"--parent", "--session", "--terminal"}
    ),
    "killall": frozenset({"-u", "--user"}),
}
"""Options that pick processes by owner, group or session rather than by name."""
_VALUES = {
    "pkill": frozenset({"--signal", "-F", "--pidfile", "--ns", "--nslist", "--cgroup"}),
    "killall": frozenset(
        {"-s", "--signal", "-o", "--older-than", "-y", "--younger-than", "-n", "--ns", "-Z"}
    ),
}


def kill_by_name(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """pkill/killall by name asks. With no name but a user, group or session (`pkill -9 -u
    me`), or a pattern that matches everything (`pkill -f .`), it kills every process of
    that owner: the floor. `killall5` always is."""
    name = program_name(argv[0])
    if only_lists(argv):
        return []
    selectors, values = _SELECTORS.get(name, frozenset()), _VALUES.get(name, frozenset())
    patterns, selected, i = [], name == "killall5", 1
    while i < len(argv):
        a, option = argv[i], argv[i].partition("=")[0]
        if option in selectors or option in values:
            selected = selected or option in selectors
            i += 1 if "=" in a else 2
            continue
        if not a.startswith("-") or a == "-":
            patterns.append(a)
        i += 1
    regex = name == "pkill" or "-r" in argv or "--regexp" in argv
    if (selected and not patterns) or (regex and any(p in _EVERYTHING for p in patterns)):
        return [Finding(_EVERY_PROCESS, "kill all", blocked=True)]
    return [Finding("kills processes by name", name)]


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
