"""Word expansion the way bash does it, as far as it can be known before the line runs:
brace lists, variables (with `${NAME:-default}`), positional parameters and `$IFS` splitting.

What cannot be known (a variable set outside the line, the output of a program) stays
visible as `${NAME}` or `$(...)` and marks the word as computed at run time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

BRACE_LIST = re.compile(r"([^{}]*)\{([^{}\s]*,[^{}\s]*)\}(.*)")
_MAX_BRACE_WORDS = 64
_PARAMETER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*|[0-9]+|[@*#])(?::?-(.*))?", re.S)
LIST_SEPARATOR = "\x1f"
"""Joins the words of `$@` in the environment, so that `"$@"` gives them back one by one."""


def expand_braces(text: str) -> list[str]:
    """`{rm,-rf,/}` -> rm -rf /, `/{etc,usr}` -> /etc /usr (bounded, like bash's order)."""
    words, done = [text], list[str]()
    while words and len(done) + len(words) <= _MAX_BRACE_WORDS:
        word = words.pop(0)
        m = BRACE_LIST.fullmatch(word)
        if m is None:
            done.append(word)
            continue
        words[:0] = [m.group(1) + item + m.group(3) for item in m.group(2).split(",")]
    return done + words


def lookup(spec: str, env: dict[str, str]) -> str | None:
    """Resolve $NAME, ${NAME}, ${NAME:-default}, $1 and $@; None when the value is unknown."""
    m = _PARAMETER.fullmatch(spec)
    if m is None:
        return None
    return env.get(m.group(1), m.group(2))


def positional(args: Sequence[str]) -> dict[str, str]:
    """`$1` ... `$9`, `$#`, `$@` and `$*` of a call with `args` (unset ones are empty)."""
    params = {str(i): (args[i - 1] if i <= len(args) else "") for i in range(1, 10)}
    params.update({"#": str(len(args)), "@": LIST_SEPARATOR.join(args)})
    params["*"] = params["@"]
    return params


def split_fields(value: str, ifs: str | None, whole: bool) -> list[str]:
    """The pieces `value` splits into: by `$IFS` unless quoted (`whole`), and always into
    its words when it is a `$@` list."""
    pieces = value.split(LIST_SEPARATOR)
    if whole or not ifs:
        return pieces
    return [field for piece in pieces for field in re.split(f"[{re.escape(ifs)}]+", piece)]
