"""The rule for git: history it destroys, and the shell code its options and config run.

git runs shell code from many places: `-c alias.x='!cmd'`, `-c core.sshCommand=cmd`,
`-c core.pager=cmd`, `rebase --exec cmd`, `bisect run cmd`, `submodule foreach cmd`,
`--upload-pack=cmd`, `ext::cmd` URLs. Each is read like `sh -c`: the code is judged with the
same rules. A setting that points git at code elsewhere (`core.hooksPath`, `include.path`)
cannot be read here and asks, as does writing any such setting with `git config`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from talaria.policy.command_words import Arg, Finding, short_flags
from talaria.policy.rules_code import INLINE_CODE

if TYPE_CHECKING:
    from talaria.policy.command_safety import Scanner

_SHELL_KEYS = re.compile(
    r"alias\..+|core\.(sshcommand|pager|editor|fsmonitor|askpass|gitproxy)|sequence\.editor"
    r"|pager\..+|diff\.external|diff\..+\.(textconv|command)|filter\..+\.(clean|smudge|process)"
    r"|merge\..+\.driver|gpg(\..+)?\.program|credential(\..+)?\.helper"
    r"|uploadpack\.packobjectshook|remote\..+\.(uploadpack|receivepack|proxy)"
    r"|(diff|merge)tool\..+\.(cmd|path)|browser\..+\.(cmd|path)|web\.browser"
    r"|sendemail\.(sendmailcmd|tocmd|cccmd|smtpserver)|core\.sshcommand",
    re.I,
)
"""Settings whose value is a command git runs (through the shell, for most)."""
_POINTER_KEYS = re.compile(
    r"core\.hookspath|include\.path|includeif\..+\.path|init\.templatedir|protocol\..*allow",
    re.I,
)
"""Settings that point git at code it will run, or let it run transports that run code."""
_GLOBAL_VALUES = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace"})
_FILTERS = tuple(
    f"--{name}-filter" for name in ("tree", "index", "msg", "env", "commit", "parent", "tag-name")
)
_COMMAND_OPTIONS: dict[str, tuple[str, ...]] = {
    "rebase": ("--exec", "-x"),
    "difftool": ("--extcmd", "-x"),
    "clone": ("--upload-pack", "-u"),
    "fetch": ("--upload-pack",),
    "pull": ("--upload-pack",),
    "ls-remote": ("--upload-pack", "--exec"),
    "archive": ("--exec",),
    "push": ("--receive-pack", "--exec"),
    "filter-branch": (*_FILTERS, "--setup"),
}
"""Options whose value is a command line git runs through the shell."""


def runs_code(key: str) -> bool:
    """Does the git setting `key` name a command, or point at code git runs?"""
    return bool(_SHELL_KEYS.fullmatch(key) or _POINTER_KEYS.fullmatch(key))


def setting_findings(key: str, value: Arg, sc: Scanner) -> list[Finding]:
    """What a git setting will run: judged like `sh -c` when it is a command."""
    if _POINTER_KEYS.fullmatch(key):
        reason = f"points git at code it runs later ({key}), which cannot be checked"
        return [Finding(reason, INLINE_CODE)]
    if not _SHELL_KEYS.fullmatch(key):
        return []
    lowered = key.lower()
    if lowered.startswith("alias.") and not value.startswith("!"):
        return sc.nested(f"git {value}")  # an alias for another git command
    if lowered == "core.fsmonitor" and value.lower() in ("true", "false", "0", "1", ""):
        return []
    if lowered.startswith("credential") and not value.startswith("!"):
        return []  # a helper named git-credential-<value>
    return sc.nested(value.removeprefix("!"))


def _split_setting(text: str) -> tuple[str, Arg]:
    key, _, value = text.partition("=")
    return key, Arg(value)


def git_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    found: list[Finding] = []
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        a = argv[i]
        if a == "-c" and i + 1 < len(argv):
            found += setting_findings(*_split_setting(argv[i + 1]), sc)
        elif a.startswith("--config-env="):
            key = a.partition("=")[2].partition("=")[0]
            if runs_code(key):
                found.append(Finding(f"sets {key} from the environment", INLINE_CODE))
        elif a.startswith("--exec-path="):
            found.append(Finding("runs git programs from another directory", INLINE_CODE))
        i += 2 if a in _GLOBAL_VALUES else 1
    sub, rest = (argv[i] if i < len(argv) else ""), argv[i + 1 :]
    return found + _subcommand(sub, rest, sc)


def _subcommand(sub: str, rest: list[Arg], sc: Scanner) -> list[Finding]:
    found = _code_in_options(sub, rest, sc)
    for url in (a for a in rest if a.startswith("ext::")):
        reason = "runs a command through git's ext:: transport"
        found += [*sc.nested(_ext(url)), Finding(reason, INLINE_CODE)]
    flags = short_flags(rest)
    if sub == "push" and (
        "f" in flags
        or any(a.startswith(("--force", "--mirror")) or a.startswith("+") for a in rest)
    ):
        found.append(Finding("rewrites history on the remote", "git push --force"))
    elif sub == "reset" and "--hard" in rest:
        found.append(Finding("discards uncommitted changes", "git reset --hard"))
    elif sub == "clean" and ("f" in flags or "--force" in rest):
        found.append(Finding("deletes untracked files", "git clean -f"))
    elif sub == "branch" and ("D" in flags or ("--delete" in rest and "--force" in rest)):
        found.append(Finding("deletes a branch that may not be merged", "git branch -D"))
    elif sub == "bisect" and rest[:1] == ["run"]:
        found += sc.check(rest[1:])
    elif sub == "submodule" and "foreach" in rest:
        after = rest[[str(a) for a in rest].index("foreach") + 1 :]
        found += sc.nested(" ".join(a for a in after if a != "--recursive"))
    elif sub == "config":
        found += _config_write(rest, sc)
    return found


def _code_in_options(sub: str, rest: list[Arg], sc: Scanner) -> list[Finding]:
    """`rebase --exec CMD`, `fetch --upload-pack=CMD`, `filter-branch --tree-filter CMD`,
    `difftool -x CMD`: each value is shell code (every one given, not only the last)."""
    found: list[Finding] = []
    for name in _COMMAND_OPTIONS.get(sub, ()):
        for k, a in enumerate(rest):
            if a == name and k + 1 < len(rest):
                found += sc.nested(rest[k + 1])
            elif a.startswith(name + "=") or (len(name) == 2 and a.startswith(name) and a != name):
                found += sc.nested(a[len(name) + 1 :] if "=" in a[: len(name) + 1] else a[2:])
    return found


def _config_write(rest: list[Arg], sc: Scanner) -> list[Finding]:
    """`git config [--global] KEY VALUE` (or `git config set KEY VALUE`) with a setting that
    runs code: the value is judged, and the write asks, since it runs later, elsewhere."""
    words = [a for a in rest if not a.startswith("-")]
    if words[:1] in (["set"], ["add"]):
        words = words[1:]
    if len(words) < 2:
        return []
    key, value = words[0], words[1]
    harmless_alias = key.lower().startswith("alias.") and not value.startswith("!")
    if harmless_alias or not runs_code(key):
        return setting_findings(key, value, sc)
    reason = f"sets git's {key}, which runs a command later, outside this check"
    return [*setting_findings(key, value, sc), Finding(reason, "git config code")]


def _ext(url: str) -> str:
    """The command of an `ext::` URL (`%` escapes a space)."""
    return url[5:].replace("% ", " ").replace("%%", "%")
