"""Rules for shell built-ins whose arguments are code the shell runs later.

`alias x='rm -rf ~'` and `trap 'rm -rf ~' EXIT` are read like `sh -c`: the code is judged
where it is written (an alias is also remembered, so `x ~` is judged as its expansion).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from talaria.policy.command_words import Arg, Finding, operands
from talaria.policy.shell_syntax import NAME

if TYPE_CHECKING:
    from talaria.policy.command_safety import Scanner


def alias_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`alias NAME=VALUE`: VALUE is code that runs wherever NAME is typed later."""
    found = []
    for arg in argv[1:]:
        name, eq, value = arg.partition("=")
        if eq and NAME.fullmatch(name.replace("-", "_")):
            sc.ctx.functions[name] = f'{value} "$@"'
            found += sc.nested(value)
    return found


def unalias_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    for name in operands(argv[1:]):
        sc.ctx.functions.pop(name, None)
    return []


def trap_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`trap CODE SIGNAL...` runs CODE when the signal (or EXIT) comes."""
    words = operands(argv[1:])
    if len(words) < 2 or words[0] == "-":
        return []
    return sc.nested(words[0])
