"""Variables whose value is code some program runs later.

`BASH_ENV=./x.sh bash -c true` sources x.sh; `GIT_SSH_COMMAND='rm -rf ~' git fetch` runs it;
`PS4='$(rm -rf ~)' bash -xc true` expands it; `LD_PRELOAD=./x.so ls` loads a library into
`ls`. An assignment is judged wherever it appears (before a command, alone, after `export`
or `env`): shell code is read like `sh -c`, a file like `source FILE`, and what names code
that cannot be read (a library, an option string) asks.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from talaria.policy.command_words import Arg, Finding
from talaria.policy.rules_code import INLINE_CODE, shell_script

if TYPE_CHECKING:
    from talaria.policy.command_safety import Scanner

_SOURCED = frozenset({"BASH_ENV", "ENV"})
"""Files every non-interactive bash (or POSIX sh) sources before it runs anything."""
_COMMANDS = frozenset(
    {
        "PROMPT_COMMAND", "GIT_SSH_COMMAND", "GIT_PAGER", "PAGER", "MANPAGER", "SYSTEMD_PAGER",
        "PSQL_PAGER", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "EDITOR", "VISUAL", "SUDO_EDITOR",
        "FCEDIT", "PSQL_EDITOR", "GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "SSH_ASKPASS", "SUDO_ASKPASS",
        "GIT_PROXY_COMMAND", "GIT_SSH", "BROWSER", "RSYNC_RSH", "LESSOPEN", "LESSCLOSE",
    }
)  # fmt: skip
"""Shell command lines some program runs (git, man, less, psql, sudo ...)."""
_EXPANDED = frozenset({"PS0", "PS1", "PS2", "PS4"})
"""Prompts: their `$(...)` runs whenever bash prints them (PS4 with `set -x`)."""
_OPAQUE = frozenset(
    {
        "LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "NODE_OPTIONS",
        "PERL5OPT", "RUBYOPT", "PYTHONSTARTUP", "GIT_EXEC_PATH", "GIT_TEMPLATE_DIR",
        "GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_PARAMETERS",
        "TAR_OPTIONS", "MAKEFLAGS", "MAKEFILES",
    }
)  # fmt: skip
"""Names of code to load or options that can name it, which cannot be read here."""
_GIT_CONFIG_VALUE = re.compile(r"GIT_CONFIG_VALUE_\d+")


def assignment_findings(assignments: list[Arg], sc: Scanner) -> list[Finding]:
    """Findings for `NAME=value` words that hand code to a program."""
    found: list[Finding] = []
    for assignment in assignments:
        name, _, value = assignment.partition("=")
        found += _variable(name, Arg(value), sc)
        if name == "PATH" and not value.startswith(("$PATH", "${PATH}")):
            sc.ctx.unknown.append("a changed PATH")  # `git` may no longer be git
    return found


def _variable(name: str, value: Arg, sc: Scanner) -> list[Finding]:
    if not value:
        return []
    if name in _SOURCED:
        return shell_script(value, sc)
    if name in _COMMANDS or _GIT_CONFIG_VALUE.fullmatch(name):
        return sc.nested(re.sub(r"^\|+|%s", " ", value))  # LESSOPEN='|cmd %s'
    if name in _EXPANDED:
        return sc.nested(f": {value}")
    if name.startswith("BASH_FUNC_"):
        return sc.nested(value)  # an exported function's body: `() { ...; }`
    if name in _OPAQUE:
        return [Finding(f"loads code named by {name}, which cannot be checked", INLINE_CODE)]
    return []
