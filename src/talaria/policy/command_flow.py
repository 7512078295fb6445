"""What flows through a pipe: the text one command hands the next, and whether it was
downloaded or decoded.

`echo cm0gLXJmIH4= | base64 -d | sh` runs `rm -rf ~`: the literal is decoded here and the
shell's input judged like typed code, so a floor-level payload is blocked in every mode. A
download cannot be read ahead of time, so running one always asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from talaria.policy.command_words import (
    FETCHED_CODE,
    INTERPRETER,
    SHELLS,
    Arg,
    Finding,
    operands,
    program_name,
    read_text,
    shell_payload,
    short_flags,
)
from talaria.policy.rules_code import decode, inline_code, printed_text

if TYPE_CHECKING:
    from talaria.policy.command_safety import Scanner
    from talaria.policy.shell_syntax import Command

_FETCHERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh"})
_DECODERS = frozenset({"base64", "base32", "xxd", "openssl", "uudecode", "gpg", "rev"})
_PASS_THROUGH = frozenset({"cat", "tee", "head", "tail"})
_LISTERS = frozenset({"find", "ls", "fd", "fdfind", "tree"})


@dataclass(frozen=True, slots=True)
class Flow:
    text: str | None
    """What the command writes to its output, when that is known exactly."""
    fetched: bool
    """The output is (or contains) a download or a decoded payload."""
    sources: tuple[str, ...] = ()
    """Directories whose paths the output lists (`find DIR`, `ls DIR`): what `| xargs cat`
    would read."""


def is_decoder(argv: list[Arg]) -> bool:
    name = program_name(argv[0]) if argv else ""
    if name == "rev":
        return True
    if name not in _DECODERS:
        return False
    flags = short_flags(argv[1:])
    return (
        "d" in flags
        or "r" in flags
        or any(a in ("--decode", "-revert", "--decrypt") for a in argv[1:])
    )


def is_fetcher(argv: list[Arg]) -> bool:
    """Downloads (curl, wget ...) or decodes (base64 -d, xxd -r ...) data."""
    return bool(argv) and (program_name(argv[0]) in _FETCHERS or is_decoder(argv))


def _own_input(argv: list[Arg], command: Command, sc: Scanner) -> str | None:
    """A here-document, here-string or file operand the command reads instead of stdin."""
    if command.heredoc is not None:
        return command.heredoc
    here = [" ".join(sc.expand(t)) for op, t in command.redirects if op == "<<<"]
    if here:
        return here[-1]
    redirected = [t for op, t in command.redirects if op == "<"]
    if redirected:
        return read_text((sc.expand(redirected[-1]) or [Arg("")])[0], sc)
    files = [w for w in operands(argv[1:]) if w != "-"]
    return read_text(files[-1], sc) if files else None


def output_of(argv: list[Arg], command: Command, before: Flow | None, sc: Scanner) -> Flow:
    """The flow out of one simple command, given the flow into it."""
    if not argv:
        return Flow(command.heredoc, False)
    name = program_name(argv[0])
    if is_decoder(argv):
        source = _own_input(argv, command, sc)
        source = source if source is not None else (before.text if before else None)
        return Flow(decode(source, argv) if source is not None else None, True)
    if name in _FETCHERS:
        return Flow(None, True)
    if name in ("echo", "printf"):
        return Flow(printed_text(argv), False)
    if name in _LISTERS:
        starts = [a for a in argv[1:] if not a.startswith(("-", "(", "!"))]
        return Flow(None, False, tuple(starts[:1] if name == "find" else starts) or (".",))
    fetched = before.fetched if before else False
    if name in _PASS_THROUGH:
        own = _own_input(argv, command, sc) if name != "tee" else None
        return Flow(own if own is not None else (before.text if before else None), fetched)
    return Flow(command.heredoc, fetched)


def piped_code(argv: list[Arg], flow: Flow, sc: Scanner) -> list[Finding]:
    """What a shell or interpreter at the end of a pipe will run, judged by its text."""
    found = [FETCHED_CODE] if flow.fetched else []
    if flow.text is None:
        if not flow.fetched:
            reason = "runs code another command produces, which cannot be checked"
            found.append(Finding(reason, "piped code"))
        return found
    name = program_name(argv[0])
    if name in SHELLS or name in ("source", "."):
        return found + sc.nested(flow.text)
    return found + inline_code(flow.text, sc, name)


def reads_program_from_stdin(argv: list[Arg]) -> bool:
    """`sh`, `bash -s`, `python3 -`, `source /dev/stdin`: the program text comes from the pipe."""
    if not argv:
        return False
    name = program_name(argv[0])
    if name in SHELLS:
        code, script, stdin_mode = shell_payload(argv)
        return code is None and (stdin_mode or script in (None, "-", "/dev/stdin"))
    if INTERPRETER.fullmatch(name):
        for a in argv[1:]:
            if a in ("-c", "-e", "-E", "-r", "-m", "-p"):
                return False
            if not a.startswith("-") or a == "-":
                return a in ("-", "/dev/stdin")
        return True
    return name in ("source", ".") and any(a in ("/dev/stdin", "-") for a in argv[1:])
