"""Programs known to be harmless: they read and print, and change nothing.

The policy has three verdicts. A command made only of these (and of shell syntax that runs
nothing, such as `cd`, `export`, `for`) is *known safe* and never asks. A command with a
rule's finding is *known dangerous* and asks (or is refused: the floor). Everything else is
*unknown*: `make test`, `python3 script.py`, `npm install` run inside the sandbox without
asking, and ask when there is no sandbox to contain them. The table is small on purpose:
a program belongs here only if no argument makes it write, run code or change the machine.
"""

from __future__ import annotations

from collections.abc import Callable

from talaria.policy.command_words import (
    SHELLS,
    Arg,
    operands,
    option_value,
    shell_payload,
    short_flags,
)
from talaria.policy.rules_git import runs_code

_READ_ONLY = frozenset(
    {
        "ls", "dir", "pwd", "cat", "tac", "head", "tail", "wc", "nl", "cut", "tr", "fold",
        "fmt", "column", "paste", "join", "comm", "diff", "cmp", "grep", "egrep", "fgrep",
        "ag", "ack", "jq", "basename", "dirname", "realpath", "readlink", "seq", "md5sum",
        "sha1sum", "sha224sum", "sha256sum", "sha384sum", "sha512sum", "b2sum", "cksum",
        "base32", "base64", "od", "hexdump", "hd", "strings", "rev", "expand", "unexpand",
        "printenv", "cal", "locale", "tty", "whoami", "id", "groups", "uname", "arch",
        "nproc", "lscpu", "lsblk", "lsusb", "lspci", "lsof", "free", "df", "du", "uptime",
        "ps", "pgrep", "pidof", "stat", "which", "whereis", "type", "echo",
        "printf", "true", "false", "test", "[", "[[", "]]", ":", "cd", "pushd", "popd",
        "dirs", "export", "set", "unset", "shopt", "read", "exit", "return", "wait", "sleep",
        "hash", "umask", "break", "continue", "shift", "getopts", "let", "getconf", "help",
        "apropos", "whatis", "lsb_release", "sw_vers", "readelf", "nm", "objdump", "size",
        "env", "alias", "unalias", "trap", "eval", "command", "exec", "time", "nice",
        "timeout", "xargs", "jobs", "disown", "declare", "typeset", "local",
        "readonly", "yes", "sum", "look", "tsort", "numfmt",
    }
)  # fmt: skip
"""Safe with any arguments. Shell built-ins and wrappers are here because what they run
(`eval CODE`, `timeout 5 CMD`, `trap CODE EXIT`) is judged on its own."""
_VERSION_FLAGS = frozenset({"--version", "-V", "--help", "-h", "version", "help"})

_GIT_READS = frozenset(
    {
        "status", "log", "show", "diff", "blame", "annotate", "shortlog", "describe",
        "rev-parse", "rev-list", "ls-files", "ls-tree", "ls-remote", "cat-file", "grep",
        "whatchanged", "name-rev", "merge-base", "for-each-ref", "show-ref", "show-branch",
        "count-objects", "check-ignore", "check-attr", "check-ref-format", "var", "help",
        "version", "diff-tree", "diff-files", "diff-index", "verify-commit", "verify-tag",
        "cherry", "range-diff",
    }
)  # fmt: skip
_GIT_LISTS: dict[str, frozenset[str]] = {
    "branch": frozenset(
        {"-a", "-r", "-v", "-vv", "-l", "--list", "--all", "--remotes", "--show-current"}
    ),
    "tag": frozenset({"-l", "--list", "-n"}),
    "remote": frozenset({"-v", "--verbose", "show", "get-url"}),
    "stash": frozenset({"list", "show"}),
    "worktree": frozenset({"list"}),
    "submodule": frozenset({"status", "summary"}),
    "config": frozenset({"--get", "--get-all", "--get-regexp", "--list", "-l", "get", "list"}),
}
"""Subcommands that only list with these words, and change things with others."""
_GIT_VALUE_OPTIONS = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})


def _git(argv: list[Arg]) -> bool:
    """Read-only git: `git status`, `git log -p`, `git branch -a`; never with a `-c` setting
    that names a program to run, or `--exec-path` (a directory of programs to run)."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        setting = argv[i + 1] if argv[i] == "-c" and i + 1 < len(argv) else ""
        if runs_code(setting.partition("=")[0]) or argv[i].startswith(
            ("--exec-path", "--config-env")
        ):
            return False
        i += 2 if argv[i] in _GIT_VALUE_OPTIONS else 1
    sub, rest = (argv[i] if i < len(argv) else ""), argv[i + 1 :]
    if any(a.startswith(("--output", "--ext-diff", "-O", "--open-files-in-pager")) for a in rest):
        return False
    if sub in _GIT_READS or sub in ("", "--version", "--help"):
        return True
    lists = _GIT_LISTS.get(sub)
    bare_lists = sub in ("branch", "tag", "remote", "submodule")  # `git stash` stashes
    return lists is not None and (rest[0] in lists if rest else bare_lists)


def _find(argv: list[Arg]) -> bool:
    """find prints; `-delete`, `-fprint` and friends write (what `-exec` runs is judged as
    a command of its own)."""
    writes = ("-delete", "-fprint", "-fprint0", "-fprintf", "-fls")
    return not any(a in writes for a in argv[1:])


def _sed(argv: list[Arg]) -> bool:
    """sed that prints (the rule for sed judges its `e`, `w` and `r` commands)."""
    return "i" not in short_flags(argv[1:]) and not any(
        a.startswith("--in-place") for a in argv[1:]
    )


def _awk(argv: list[Arg]) -> bool:
    """awk whose program only prints: no `system`, pipes, redirections or `-f` files."""
    if option_value(argv, "-f", "--file") is not None:
        return False
    program = next((a for a in argv[1:] if not a.startswith("-")), "")
    return not any(word in program for word in ("system", "|", ">", "getline", "@load"))


def _no_output_file(*options: str) -> Callable[[list[Arg]], bool]:
    return lambda argv: option_value(argv, *options) is None


def _at_most_operands(count: int) -> Callable[[list[Arg]], bool]:
    """`uniq IN OUT` and `xxd IN OUT` write their last operand."""
    return lambda argv: len(operands(argv[1:])) <= count


def _no_operands(argv: list[Arg]) -> bool:
    """`hostname` prints, `hostname NAME` renames the machine; `date -s` sets the clock."""
    return not operands(argv[1:]) and not any(a in ("-s", "--set") for a in argv[1:])


def _pager(argv: list[Arg]) -> bool:
    """less and more without start-up commands (`+!cmd`) or key files."""
    return not any(a.startswith(("+", "-k", "--lesskey")) for a in argv[1:])


def _shell(argv: list[Arg]) -> bool:
    """`sh -c CODE` is as safe as CODE, which is judged on its own; a script file is not."""
    return shell_payload(argv)[0] is not None


def _lists_signals(argv: list[Arg]) -> bool:
    return any(a in ("-l", "-L", "--list", "--table") for a in argv[1:])


def _man(argv: list[Arg]) -> bool:
    """man, unless told which pager or browser to run."""
    return not any(a.startswith(("-P", "--pager", "-H", "--html")) for a in argv[1:])


def _rg(argv: list[Arg]) -> bool:
    """ripgrep, unless `--pre` names a program to run on every file."""
    return not any(a.startswith("--pre") for a in argv[1:])


_WHEN: dict[str, Callable[[list[Arg]], bool]] = {
    "git": _git,
    "find": _find,
    "sed": _sed,
    "awk": _awk,
    "gawk": _awk,
    "mawk": _awk,
    "sort": _no_output_file("-o", "--output"),
    "shuf": _no_output_file("-o", "--output"),
    "iconv": _no_output_file("-o", "--output"),
    "tree": _no_output_file("-o"),
    "file": lambda argv: "-C" not in argv[1:] and "--compile" not in argv[1:],
    "uniq": _at_most_operands(1),
    "xxd": _at_most_operands(1),
    "hostname": _no_operands,
    "date": _no_operands,
    "less": _pager,
    "more": _pager,
    "rg": _rg,
    "man": _man,
    "kill": _lists_signals,
    "killall": _lists_signals,
    "yq": lambda argv: "-i" not in argv and "--inplace" not in argv,
}


def is_known_safe(name: str, argv: list[Arg]) -> bool:
    """Does running `argv` (its program called `name`) only read and print?"""
    if name in _READ_ONLY:
        return True
    check = _shell if name in SHELLS else _WHEN.get(name)
    if check is not None:
        return check(argv)
    args = argv[1:]
    return "/" not in argv[0] and len(args) == 1 and args[0] in _VERSION_FLAGS
