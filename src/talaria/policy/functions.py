"""Shell functions a command line defines: their bodies, and the fork bomb among them.

`f() { rm -rf "$1"; }; f ~` deletes the home through a name the rules do not know, so a
call of a function defined in the same line is judged as its body with the call's
arguments in place of `$1`, `$@`. Definitions are found by their `() {` (or `function`),
then the name is read backwards: anchoring on the cheap part keeps the scan linear.
"""

from __future__ import annotations

import re

from talaria.policy.command_words import Finding

_FUNCTION_BODY = re.compile(
    r"\(\s*\)\s*\{([^}]{0,256})\}|\bfunction\s+([^\s(){};|&<>]{1,64})\s*(?:\(\s*\)\s*)?\{([^}]{0,256})\}"
)
_FUNCTION_NAME = re.compile(r"([^\s(){};|&<>]{1,64})\s*$")
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\\\]|\\\\.)*\"")


def _masked(src: str) -> str:
    """`src` with quoted text blanked, positions kept: `echo ':(){ :|:& };:'` defines nothing."""
    return _QUOTED.sub(lambda m: "'" + " " * (len(m.group()) - 2) + "'", src)


def definitions(src: str) -> dict[str, str]:
    """The functions `src` defines, name -> body (the body as written, quotes kept)."""
    masked, found = _masked(src), {}
    for m in _FUNCTION_BODY.finditer(masked):
        if m.group(2):
            name, body = m.group(2), src[m.start(3) : m.end(3)]
        else:
            before = _FUNCTION_NAME.search(masked, max(0, m.start() - 80), m.start())
            name, body = (before.group(1) if before else ""), src[m.start(1) : m.end(1)]
        if name:
            found[name] = body
    return found


def fork_bomb(functions: dict[str, str]) -> list[Finding]:
    """`:(){ :|:& };:` and friends: a function that pipes or backgrounds itself."""
    for name, body in functions.items():
        escaped = re.escape(name)
        if re.search(rf"(^|[\s;&|]){escaped}\s*[|&]\s*{escaped}", body):
            return [Finding("a fork bomb exhausts the machine", "fork bomb", blocked=True)]
    return []
