"""Is a shell command dangerous? The shell is read properly, then a table of rules decides.

A list of regular expressions over the raw text is easy to slip past (r''m -rf /, $'\\x72m',
`X=rm; $X -rf /`, `bash -c "..."`). So the command is tokenised the way bash would
(`shell_syntax`), variables set earlier in the same command are expanded (with $IFS splitting),
brace lists are expanded, wrappers (sudo, env, timeout ...) are stripped, program paths are
reduced to their names, and nested code (`sh -c`, `eval`, `$( )`, backticks, `<( )`, heredocs
fed to a shell, `find -exec`) is analysed recursively. What cannot be seen through (a program
name computed at run time, nesting deeper than the cap) needs approval: fail closed.
"""

from __future__ import annotations

import re
import shlex

from talaria.tools.approval import Assessment
from talaria.tools.command_rules import (
    FETCHED_CODE,
    INTERPRETER,
    SHELLS,
    Arg,
    Finding,
    program_name,
    rm_rule,
    rule_for,
    shell_payload,
    short_flags,
    write_target,
)
from talaria.tools.shell_syntax import NAME, WRITE_REDIRECTS, Command, Word, parse

MAX_DEPTH = 8

_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "esac"}
)
_DECLARERS = frozenset({"export", "declare", "typeset", "local", "readonly"})
_BRACE_LIST = re.compile(r"([^{}]*)\{([^{}\s]*,[^{}\s]*)\}(.*)")
_MAX_BRACE_WORDS = 64
_FUNCTION_BODY = re.compile(
    r"\(\s*\)\s*\{([^}]{0,256})\}|\bfunction\s+(\S{1,64})\s*\{([^}]{0,256})\}"
)
_FUNCTION_NAME = re.compile(r"([^\s(){};|&<>]{1,64})\s*$")
"""A function definition is found by its `() {` (or `function`), then its name is read
backwards: anchoring on the cheap part keeps the scan linear on long input."""
_FORK_LOOP = re.compile(r"fork\s+while\s+fork|while\s*\(?\s*(?:True|1)\s*\)?\s*:?\s*os\.fork\(\)")
_FETCHERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh"})
_DECODERS = frozenset({"base64", "base32", "xxd", "openssl", "uudecode", "gpg"})
# wrapper name -> (options that take a value, operands before the wrapped command)
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "sudo": (
        frozenset(
            {
                "-u",
                "-g",
                "-p",
                "-C",
                "-h",
                "-D",
                "-r",
                "-t",
                "-T",
                "-U",
                "--user",
                "--group",
                "--prompt",
                "--close-from",
                "--chdir",
                "--host",
                "--role",
                "--type",
                "--command-timeout",
                "--other-user",
            }
        ),
        0,
    ),
    "doas": (frozenset({"-u", "-C"}), 0),
    "env": (frozenset({"-u", "--unset", "-C", "--chdir"}), 0),
    "nice": (frozenset({"-n", "--adjustment"}), 0),
    "ionice": (frozenset({"-c", "-n", "-p", "-P", "-u", "--class", "--classdata"}), 0),
    "timeout": (frozenset({"-s", "-k", "--signal", "--kill-after"}), 1),
    "nohup": (frozenset(), 0),
    "setsid": (frozenset(), 0),
    "command": (frozenset(), 0),
    "exec": (frozenset({"-a"}), 0),
    "builtin": (frozenset(), 0),
    "time": (frozenset({"-f", "-o", "--format", "--output"}), 0),
    "stdbuf": (frozenset({"-i", "-o", "-e", "--input", "--output", "--error"}), 0),
    "xargs": (
        frozenset(
            {
                "-a",
                "-d",
                "-E",
                "-I",
                "-L",
                "-n",
                "-P",
                "-s",
                "--arg-file",
                "--delimiter",
                "--eof",
                "--replace",
                "--max-lines",
                "--max-args",
                "--max-procs",
                "--max-chars",
                "--process-slot-var",
            }
        ),
        0,
    ),
    "busybox": (frozenset(), 0),
    "watch": (frozenset({"-n", "--interval"}), 0),
    "unbuffer": (frozenset(), 0),
}


def _expand_braces(text: str) -> list[str]:
    """`{rm,-rf,/}` -> rm -rf /, `/{etc,usr}` -> /etc /usr (bounded, like bash's order)."""
    words, done = [text], list[str]()
    while words and len(done) + len(words) <= _MAX_BRACE_WORDS:
        word = words.pop(0)
        m = _BRACE_LIST.fullmatch(word)
        if m is None:
            done.append(word)
            continue
        words[:0] = [m.group(1) + item + m.group(3) for item in m.group(2).split(",")]
    return done + words


def _is_assignment(arg: str) -> bool:
    name, eq, _ = arg.partition("=")
    return bool(eq) and NAME.fullmatch(name) is not None


def _lookup(spec: str, env: dict[str, str]) -> str | None:
    """Resolve $NAME, ${NAME} and ${NAME:-default}; None when the value is unknown."""
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?::?-(.*))?", spec, re.S)
    if m is None:
        return None
    return env.get(m.group(1), m.group(2))


class Scanner:
    """Walks one piece of shell code (and everything nested in it) collecting findings."""

    def __init__(
        self, src: str, depth: int = 0, env: dict[str, str] | None = None, cwd: str | None = None
    ) -> None:
        self.src, self.depth = src, depth
        self.cwd = cwd  # where an earlier `cd` in the line moved to, when that is known
        self.env = dict(env) if env is not None else {"IFS": " \t\n", "HOME": "~"}

    def nested(self, src: str) -> list[Finding]:
        if self.depth >= MAX_DEPTH:
            return [Finding("nested too deeply to check", "deep nesting")]
        return Scanner(src, self.depth + 1, self.env, self.cwd).scan()

    def scan(self) -> list[Finding]:
        found = _fork_bomb(self.src)
        for pipeline in parse(self.src):
            argvs = []
            for command in pipeline:
                for word in [*command.words, *(target for _, target in command.redirects)]:
                    found += [
                        f
                        for p in word.parts
                        if p.kind in ("cmd", "proc")
                        for f in self.nested(p.text)
                    ]
                argv = self._expand_command(command)
                found += self.check(argv, command)
                argvs.append(unwrap(argv)[0])
            for k, argv in enumerate(argvs):
                if k and reads_program_from_stdin(argv):
                    found += self._piped_code(argvs[:k], pipeline[:k])
        return found

    def _piped_code(self, argvs: list[list[Arg]], commands: list[Command]) -> list[Finding]:
        """What an interpreter at the end of a pipe will run: downloads are never checkable;
        `echo CODE | sh` and `cat <<EOF | sh` are checked like `sh -c CODE`."""
        found = []
        for argv, command in zip(argvs, commands, strict=True):
            if is_fetcher(argv):
                found.append(FETCHED_CODE)
            elif command.heredoc is not None:
                found += self.nested(command.heredoc)
            elif argv and program_name(argv[0]) in ("echo", "printf"):
                found += self.nested(" ".join(a for a in argv[1:] if not a.startswith("-")))
        return found

    def check(self, argv: list[Arg], command: Command | None = None) -> list[Finding]:
        """Findings for one simple command (already expanded)."""
        found = []
        for op, target in command.redirects if command else []:
            if op in WRITE_REDIRECTS:
                found += [f for arg in self.expand(target)[:1] for f in write_target(arg)]
        argv, wrapped = unwrap(argv)
        found += wrapped
        if not argv:
            return found
        if command and reads_program_from_stdin(argv):
            here_strings = [t for op, t in command.redirects if op == "<<<"]
            code = [command.heredoc] if command.heredoc else []
            code += [" ".join(self.expand(word)) for word in here_strings]
            found += [f for text in code for f in self.nested(text)]
        name = program_name(argv[0])
        if not name or "$" in name or (name not in ("[", "[[") and any(c in name for c in "*?[")):
            found.append(Finding("the program name is computed at run time", "dynamic command"))
            found += [f for f in rm_rule([Arg("rm"), *argv[1:]], self) if f.blocked]
        rule = rule_for(name)
        if rule is not None:
            found += rule(argv, self)
        return found

    def _expand_command(self, command: Command) -> list[Arg]:
        """The command's argv after expansion, minus keywords and leading assignments
        (which are remembered when they stand alone: `X=rm; $X ...`)."""
        argv = [arg for word in command.words for arg in self.expand(word)]
        while argv and argv[0] in _KEYWORDS:
            argv.pop(0)
        count = 0
        while count < len(argv) and _is_assignment(argv[count]):
            count += 1
        if count == len(argv) or argv[count] in _DECLARERS:
            for assignment in filter(_is_assignment, argv):
                name, _, value = assignment.partition("=")
                self.env[name] = value
            return []
        return argv[count:]

    def expand(self, word: Word) -> list[Arg]:
        """The fields bash would produce from `word` (unknown values stay as `${NAME}`)."""
        first = word.parts[0] if len(word.parts) == 1 else None
        if first and first.kind == "lit" and not first.quoted and _BRACE_LIST.fullmatch(first.text):
            return [Arg(w) for w in _expand_braces(first.text) if w]
        fields: list[str] = []
        current, fetched, quoted = "", False, False
        for part in word.parts:
            quoted = quoted or part.quoted
            value = _lookup(part.text, self.env) if part.kind == "var" else None
            if part.kind == "lit":
                current += part.text
            elif part.kind in ("cmd", "proc"):
                current += "$(...)"
                fetched = fetched or self._fetches(part.text)
            elif value is None:
                current += "${" + part.text + "}"
            elif part.quoted or not self.env.get("IFS"):
                current += value
            else:
                for k, piece in enumerate(re.split(f"[{re.escape(self.env['IFS'])}]+", value)):
                    if k and current:
                        fields.append(current)
                        current = ""
                    current += piece
        if current or quoted:
            fields.append(current)
        args = [Arg(f) for f in fields]
        for arg in args:
            arg.fetched = fetched
        return args

    def _fetches(self, src: str) -> bool:
        """Does this substitution download or decode something?"""
        if self.depth >= MAX_DEPTH:
            return False  # the nested scan already asks for approval of this depth
        inner = Scanner(src, self.depth + 1, self.env)
        return any(
            is_fetcher(unwrap(inner._expand_command(command))[0])
            for pipeline in parse(src)
            for command in pipeline
        )


def unwrap(argv: list[Arg]) -> tuple[list[Arg], list[Finding]]:
    """Strip sudo/env/timeout/... to reach the program that really runs."""
    found: list[Finding] = []
    while argv and (spec := _WRAPPERS.get(program_name(argv[0]))) is not None:
        name = program_name(argv[0])
        if name in ("sudo", "doas"):
            found.append(Finding(f"runs as root through {name}", "sudo"))
        if name == "command" and argv[1:2] in (["-v"], ["-V"]):
            return [], found
        with_value, leading = spec
        i, split_string = 1, None
        while i < len(argv):
            a = argv[i]
            if a == "--":
                i += 1
                break
            if name == "env" and a.startswith(("-S", "--split-string")):
                if a in ("-S", "--split-string"):
                    split_string, i = (argv[i + 1] if i + 1 < len(argv) else ""), i + 2
                else:
                    split_string, i = a.partition("=")[2] if "=" in a else a[2:], i + 1
                break
            if a.startswith("-") and len(a) > 1:
                i += 2 if a in with_value else 1
            elif name in ("sudo", "doas", "env") and _is_assignment(a):
                i += 1
            else:
                break
        rest = argv[i + leading :]
        if split_string is not None:
            try:
                words = shlex.split(split_string)
            except ValueError:
                words = split_string.split()
            rest = [Arg(w) for w in words] + rest
        argv = rest
    return argv, found


def is_fetcher(argv: list[Arg]) -> bool:
    """Downloads (curl, wget ...) or decodes (base64 -d, xxd -r ...) data."""
    if not argv:
        return False
    name = program_name(argv[0])
    if name in _FETCHERS:
        return True
    if name not in _DECODERS:
        return False
    flags = short_flags(argv[1:])
    return (
        "d" in flags
        or "r" in flags
        or any(a in ("--decode", "-revert", "--decrypt") for a in argv[1:])
    )


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


def _fork_bomb(src: str) -> list[Finding]:
    """`:(){ :|:& };:` and friends: a function that pipes or backgrounds itself."""
    for m in _FUNCTION_BODY.finditer(src):
        if m.group(2):
            name, body = m.group(2), m.group(3)
        else:
            before = _FUNCTION_NAME.search(src, max(0, m.start() - 80), m.start())
            name, body = (before.group(1) if before else ""), m.group(1)
        name = re.escape(name)
        if name and re.search(rf"(^|[\s;&|]){name}\s*[|&]\s*{name}", body):
            return [Finding("a fork bomb exhausts the machine", "fork bomb", blocked=True)]
    if _FORK_LOOP.search(src):
        return [Finding("a fork bomb exhausts the machine", "fork bomb", blocked=True)]
    return []


def assess_command(command: str) -> Assessment | None:
    """None when the command is safe; else why it needs approval, or that it is blocked.

    When a command does several dangerous things the pattern joins all of them, so a grant
    for one ("git push --force") never silently covers another in the same line.
    """
    findings = Scanner(command).scan()
    if not findings:
        return None
    blocked = [f for f in findings if f.blocked]
    chosen = blocked or findings
    return Assessment(
        command=command,
        reason="; ".join(dict.fromkeys(f.reason for f in chosen)),
        pattern=" + ".join(sorted({f.pattern for f in chosen})),
        blocked=bool(blocked),
    )
