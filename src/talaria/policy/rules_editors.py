"""Editors driven by scripts: sed, ed, ex and vim run shell code from their commands.

`sed 'e rm -rf ~'` and `sed 's/.*/rm -rf ~/e'` run a shell command; `sed 'w ~/.bashrc'`
writes a file. `ed` and `ex`/`vim -es` scripts run `!cmd`, `r !cmd` and `w !cmd`; vim's
`-c`, `+cmd` and `--cmd` options are ex commands too. Commands that can be read are judged
like `sh -c`; ones that make the editor run what it computes (sed's `e` without a command,
`s///e`, vim's `system()`, `:python`, `:source`) ask, as inline interpreter code does.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from talaria.policy.command_words import Arg, Finding, operands, program_name, read_text
from talaria.policy.rules_code import opaque, stdin_texts
from talaria.policy.rules_files import reads_rule, write_target, write_targets

if TYPE_CHECKING:
    from talaria.policy.command_safety import Scanner

_IN_PLACE = re.compile(r"-[a-zA-Z]*i")
_ED_SHELL = re.compile(r"^\s*[0-9.,$;+\-'a-z]*\s*(?:[rweEW]\s*)?!(.*)$")
_EX_SHELL = re.compile(
    r"^[\s:]*[0-9.,$%'<>;+\-]*\s*(?:(?:sil(?:ent)?!?\s+)?"
    r"(?:r(?:ead?)?|w(?:rite?)?|wq|x(?:it)?|up(?:date)?|e(?:dit)?|ene?w?)\s*)?!(.*)$"
)
_EX_OPAQUE = re.compile(
    r"\b(?:system|systemlist|exe(?:cute)?|term(?:inal)?|py(?:thon)?3?|pyx?|lua|perl|ruby|tcl"
    r"|mz(?:scheme)?|so(?:urce)?|norm(?:al)?!?|call|job_?start|libcall|au(?:tocmd)?|redir)\b"
)
_RESTRICTED = frozenset({"rvim", "rview", "rgvim", "red"})


def sed_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """sed: `e CMD` and `s///e` run shell code, `w FILE` writes, `-i` rewrites its files."""
    scripts, files, explicit, i = [], [], False, 1
    while i < len(argv):
        a = argv[i]
        if a in ("-e", "--expression", "-f", "--file") and i + 1 < len(argv):
            explicit = True
            value = argv[i + 1]
            text = value if a in ("-e", "--expression") else read_text(value, sc)
            scripts.append(text)
            i += 2
            continue
        if a.startswith(("--expression=", "--file=")):
            explicit = True
            value = Arg(a.partition("=")[2])
            scripts.append(value if a.startswith("--e") else read_text(value, sc))
        elif a.startswith("-") and a != "-" and not a.startswith("--"):
            i += 1 if a[1:] not in ("l",) else 2
            continue
        elif not a.startswith("-") or a == "-":
            files.append(a)
        i += 1
    if not explicit and files:
        scripts.append(files.pop(0))
    in_place = any(
        a.startswith("--in-place") or _IN_PLACE.match(a) for a in argv[1:] if a not in scripts
    )
    found = write_targets(files, sc) if in_place else reads_rule([argv[0], Arg(""), *files], sc)
    if "--sandbox" in argv:
        return found
    for script in scripts:
        if script is None:
            found.append(opaque("a sed script that cannot be read"))
        else:
            found += _sed_script(script, sc)
    return found


def _sed_script(script: str, sc: Scanner) -> list[Finding]:
    """Walk a sed script's commands: what `e` runs, what `w` and `r` touch."""
    found: list[Finding] = []
    i, n = 0, len(script)
    while i < n:
        c = script[i]
        if c in " \t\n;{}!0123456789$,~+":
            i += 1
        elif c in "/\\":
            delimiter = "/" if c == "/" else script[i + 1 : i + 2]
            i = _past(script, i + (1 if c == "/" else 2), delimiter)
        elif c == "#" or c in "aic:btT":
            i = _line_end(script, i) if c in "#aic" else _label_end(script, i + 1)
        elif c in "ewWrR":
            end = _line_end(script, i)
            arg = script[i + 1 : end].strip()
            found += _sed_argument(c, arg, sc)
            i = end
        elif c in "sy":
            delimiter = script[i + 1 : i + 2]
            i = _past(script, _past(script, i + 2, delimiter), delimiter)
            flags = re.match(r"[gpiImMe0-9w]*", script[i:])
            flag_text = flags.group() if flags else ""
            if c == "s" and "e" in flag_text:
                found.append(opaque("the text sed edits as a shell command (s///e)"))
            if c == "s" and "w" in flag_text:
                end = _line_end(script, i)
                found += write_target(script[i + flag_text.index("w") + 1 : end].strip(), sc)
                i = end
            else:
                i += len(flag_text)
        else:
            i += 1
    return found


def _sed_argument(command: str, arg: str, sc: Scanner) -> list[Finding]:
    if command == "e":
        return sc.nested(arg) if arg else [opaque("the text sed edits as a shell command (e)")]
    if command in "wW":
        return write_target(arg, sc)
    return reads_rule([Arg("cat"), Arg(arg)], sc)


def _past(script: str, i: int, delimiter: str) -> int:
    """The index after the next unescaped `delimiter` from `i`."""
    while i < len(script) and script[i] != delimiter:
        i += 2 if script[i] == "\\" else 1
    return i + 1


def _line_end(script: str, i: int) -> int:
    end = script.find("\n", i)
    return len(script) if end < 0 else end


def _label_end(script: str, i: int) -> int:
    m = re.compile(r"[;\n]").search(script, i)
    return m.start() if m else len(script)


def ed_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """ed reads its commands from stdin: `!cmd`, `r !cmd`, `w !cmd` run shell code."""
    if program_name(argv[0]) in _RESTRICTED:
        return []
    texts, unknown = stdin_texts(sc)
    found = [opaque("ed commands piped in from another program")] if unknown else []
    for text in texts:
        for line in text.splitlines():
            if m := _ED_SHELL.match(line):
                found += sc.nested(m.group(1))
    return found + reads_rule([argv[0], *operands(argv[1:])], sc)


def vim_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """vim/ex: `-c CMD`, `+CMD`, `--cmd CMD`, `-S FILE`, `-u VIMRC`, and in ex mode (`ex`,
    `vim -e`, `-es`) the commands it reads from stdin."""
    name = program_name(argv[0])
    if name in _RESTRICTED or "-Z" in argv:
        return []
    commands: list[str] = []
    found: list[Finding] = []
    for k, a in enumerate(argv[1:], 1):
        value = argv[k + 1] if k + 1 < len(argv) else Arg("")
        if a in ("-c", "--cmd"):
            commands.append(value)
        elif a.startswith("+") and len(a) > 1:
            commands.append(a[1:])
        elif a in ("-S", "-u") and value not in ("NONE", "NORC", "DEFAULTS"):
            text = read_text(value, sc)
            commands += text.splitlines() if text is not None else []
            found += [opaque(f"vim with the script {value}")] if text is None else []
        elif a == "-s":
            found.append(opaque("vim typing keys from a file"))
        elif a in ("-w", "-W"):
            found += write_target(value, sc)
    ex_mode = name in ("ex", "exim") or any(
        len(a) > 1 and a[0] == "-" and a[1] in "eE" for a in argv[1:]
    )
    if ex_mode:
        texts, unknown = stdin_texts(sc)
        found += [opaque("ex commands piped in from another program")] if unknown else []
        commands += [line for text in texts for line in text.splitlines()]
    return found + [f for command in commands for f in ex_command(command, sc)]


def ex_command(line: str, sc: Scanner) -> list[Finding]:
    """One ex command line: `!cmd`, `r !cmd`, `w !cmd` are shell code; `system()`, the
    language interfaces and `:source` run what cannot be read here."""
    if m := _EX_SHELL.match(line):
        return sc.nested(m.group(1))
    if _EX_OPAQUE.search(line):
        return [opaque(f"the editor command {line.strip()[:60]!r}")]
    return []
