"""Programs that run shell code named in an option: tar, rsync, scp, ssh, man, less, make.

`tar --checkpoint-action=exec=CMD`, `rsync -e CMD`, `ssh -o ProxyCommand=CMD`, `man -P CMD`,
`less '+!CMD'` and a makefile's recipes all hand CMD to a shell. Each is read like `sh -c`:
the code is judged with the same rules when it can be read, and asks when it cannot (a
makefile piped in from a program, an ssh config that cannot be opened).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from talaria.policy.command_words import Arg, Finding, absolute, read_text
from talaria.policy.rules_code import opaque, stdin_texts
from talaria.policy.rules_files import copies_rule, reads_rule

if TYPE_CHECKING:
    from talaria.policy.command_safety import Scanner

_TAR_COMMANDS = (
    "--to-command",
    "--use-compress-program",
    "-I",
    "--rsh-command",
    "--info-script",
    "--new-volume-script",
    "-F",
)
_SSH_COMMAND_KEYS = frozenset({"proxycommand", "localcommand", "knownhostscommand"})
_SSH_CONFIG_LINE = re.compile(
    r"^\s*(proxycommand|localcommand|knownhostscommand)\s*=?\s*(.+)$"
    r"|^\s*match\b.*\bexec\s+(\"[^\"]*\"|\S+)",
    re.I | re.M,
)
_SSH_VALUE_OPTIONS = frozenset("bcDEeFIiJLlmOopQRSWw")
_MAKE_SHELL = re.compile(r"\$\(shell\s+([^()]*(?:\([^()]*\)[^()]*)*)\)")
_MAKE_ASSIGN_SHELL = re.compile(r"^[\w.-]+\s*!=\s*(.+)$", re.M)
_MAKE_SHELL_VARIABLE = re.compile(r"^\s*(?:override\s+|export\s+)?SHELL\s*[:+?]?=\s*(\S+)", re.M)
_STANDARD_SHELLS = frozenset({"/bin/sh", "/bin/bash", "/usr/bin/sh", "/usr/bin/bash", "sh", "bash"})


def _values(argv: list[Arg], *names: str) -> list[Arg]:
    """Every value of the options `names` (`--opt=V`, `--opt V`, `-oV`, `-o V`)."""
    found: list[Arg] = []
    for k, a in enumerate(argv[1:], 1):
        for name in names:
            if a == name and k + 1 < len(argv):
                found.append(argv[k + 1])
            elif name.startswith("--") and a.startswith(name + "="):
                found.append(Arg(a.partition("=")[2]))
            elif len(name) == 2 and not a.startswith("--") and a.startswith(name) and a != name:
                found.append(Arg(a[2:]))
    return found


def tar_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`--to-command`, `-I`/`--use-compress-program`, `--checkpoint-action=exec=`, the
    volume scripts: shell code tar runs."""
    found = reads_rule(argv, sc)
    codes = _values(argv, *_TAR_COMMANDS)
    codes += [Arg(a[5:]) for a in _values(argv, "--checkpoint-action") if a.startswith("exec=")]
    return found + [f for code in codes for f in sc.nested(code)]


def ssh_options(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`-o ProxyCommand=CMD` (and LocalCommand, KnownHostsCommand) runs CMD here; so do
    those lines in a `-F` config file, which asks when it cannot be read."""
    found: list[Finding] = []
    for option in _values(argv, "-o"):
        parts = re.split(r"\s*=\s*|\s+", option.strip(), maxsplit=1)
        key, value = parts[0].lower(), parts[1] if len(parts) > 1 else ""
        if key in _SSH_COMMAND_KEYS and value.lower() != "none":
            found += sc.nested(value)
    for config in _values(argv, "-F"):
        text = read_text(config, sc)
        if text is None:
            found.append(opaque(f"ssh with the config file {config}"))
            continue
        for m in _SSH_CONFIG_LINE.finditer(text):
            found += sc.nested((m.group(2) or m.group(3) or "").strip('"'))
    return found


def ssh_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`ssh host CMD...` runs CMD in the remote shell: checked like a local one."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        takes_value = len(argv[i]) == 2 and argv[i][1] in _SSH_VALUE_OPTIONS
        i += 2 if takes_value else 1
    remote = argv[i + 1 :]
    return ssh_options(argv, sc) + (sc.nested(" ".join(remote)) if remote else [])


def remote_copy_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """scp/sftp/rsync: a copy, plus the remote shell they start (`rsync -e CMD`,
    `scp -S PROGRAM`, `-o ProxyCommand=CMD`)."""
    found = copies_rule(argv, sc) + ssh_options(argv, sc)
    shells = _values(argv, "-e", "--rsh", "--rsync-path") if argv[0].endswith("rsync") else []
    found += [f for code in shells for f in sc.nested(code)]
    if not argv[0].endswith("rsync"):
        found += [f for program in _values(argv, "-S") for f in sc.check([program])]
    return found


def man_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`man -P CMD`, `man --html=BROWSER`: the pager or browser is a command line."""
    return [f for code in _values(argv, "-P", "--pager", "-H", "--html") for f in sc.nested(code)]


def pager_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """less/more: start-up commands (`+!CMD`, `+|mCMD`) run shell code; key files may bind
    keys to it."""
    found = reads_rule(argv, sc)
    for a in argv[1:]:
        if a.startswith("+") and "!" in a:
            found += sc.nested(a.partition("!")[2])
        elif a.startswith("+") and "|" in a:
            found += sc.nested(a.partition("|")[2][1:])
        elif a.startswith(("-k", "--lesskey")):
            found.append(opaque("less with a key file"))
    return found


def make_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """A makefile read from stdin (`make -f -`), given with `--eval`, or written earlier in
    the same line is judged by its recipes and `$(shell ...)` calls; the project's own
    makefile is left to the sandbox (an unknown program)."""
    texts: list[str] = list(_values(argv, "--eval", "-E"))
    for name in _values(argv, "-f", "--file", "--makefile"):
        if name in ("-", "/dev/stdin"):
            piped, unknown = stdin_texts(sc)
            if unknown or not piped:
                return [opaque("a makefile read from its input")]
            texts += piped
        elif (written := sc.ctx.written.get(absolute(name, sc) or "")) is not None:
            texts.append(written)
    shells = [a[6:] for a in argv[1:] if a.startswith("SHELL=")]
    found = [opaque(f"make with the shell {s}") for s in shells if s not in _STANDARD_SHELLS]
    return found + [f for text in texts for f in makefile_code(text, sc)]


def makefile_code(text: str, sc: Scanner) -> list[Finding]:
    """The shell code a makefile runs: recipe lines, `$(shell ...)`, `VAR != cmd`."""
    found: list[Finding] = []
    for line in text.splitlines():
        if line.startswith("\t"):
            found += sc.nested(line.lstrip("\t").lstrip("@+-"))
    found += [f for m in _MAKE_SHELL.finditer(text) for f in sc.nested(m.group(1))]
    found += [f for m in _MAKE_ASSIGN_SHELL.finditer(text) for f in sc.nested(m.group(1))]
    for m in _MAKE_SHELL_VARIABLE.finditer(text):
        if m.group(1) not in _STANDARD_SHELLS:
            found.append(opaque(f"make with the shell {m.group(1)}"))
    return found
