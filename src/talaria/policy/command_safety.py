"""Is a shell command dangerous? The shell is read properly, then a table of rules decides.

A list of regular expressions over the raw text is easy to slip past (r''m -rf /, $'\\x72m',
`X=rm; $X -rf /`, `bash -c "..."`). So the command is tokenised the way bash would
(`shell_syntax`), variables set earlier in the same command are expanded (with $IFS splitting),
brace lists are expanded, wrappers (sudo, env, timeout, taskset ...) are stripped, program
paths are reduced to their names, and nested code (`sh -c`, `eval`, `$( )`, backticks, `<( )`,
heredocs fed to a shell, `find -exec`, script files, decoded pipes) is analysed recursively.
What cannot be seen through (a program name computed at run time, a download run as code,
nesting deeper than the cap) needs approval: fail closed.
"""

from __future__ import annotations

import re
from pathlib import Path

from talaria.policy.approval import Assessment
from talaria.policy.command_flow import Flow, output_of, piped_code, reads_program_from_stdin
from talaria.policy.command_rules import rm_rule, rule_for
from talaria.policy.command_words import SHELLS, Arg, Finding, ScanContext, program_name
from talaria.policy.command_wrappers import unwrap
from talaria.policy.rules_code import local_program
from talaria.policy.rules_files import read_redirect, remember_write, write_target
from talaria.policy.shell_syntax import NAME, WRITE_REDIRECTS, Command, Word, parse

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
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\\\]|\\\\.)*\"")
_SYSTEM_PREFIXES = ("/usr/", "/bin/", "/sbin/", "/lib", "/opt/", "/nix/", "/snap/", "/System/")


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
        self,
        src: str,
        depth: int = 0,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        ctx: ScanContext | None = None,
    ) -> None:
        self.src, self.depth = src, depth
        self.ctx = ctx if ctx is not None else ScanContext()
        self.cwd = cwd or self.ctx.base  # where an earlier `cd` in the line moved to
        self.env = dict(env) if env is not None else {"IFS": " \t\n", "HOME": "~"}
        self.command: Command | None = None
        """The simple command being judged (rules read its heredoc and redirections)."""
        self.piped_text: list[str] = []
        """What an earlier command of the pipeline writes into it, when that is known."""

    def nested(self, src: str) -> list[Finding]:
        if self.depth >= MAX_DEPTH:
            return [Finding("nested too deeply to check", "deep nesting")]
        return Scanner(src, self.depth + 1, self.env, self.cwd, self.ctx).scan()

    def scan(self) -> list[Finding]:
        found = _fork_bomb(self.src)
        for pipeline in parse(self.src):
            flow: Flow | None = None
            for command in pipeline:
                for word in [*command.words, *(target for _, target in command.redirects)]:
                    found += [
                        f
                        for p in word.parts
                        if p.kind in ("cmd", "proc")
                        for f in self.nested(p.text)
                    ]
                argv = self._expand_command(command)
                self.piped_text = [flow.text] if flow is not None and flow.text else []
                found += self.check(argv, command, flow)
                real = unwrap(argv)[0]
                if flow is not None and reads_program_from_stdin(real):
                    found += piped_code(real, flow, self)
                flow = output_of(real, command, flow, self)
        return found

    def check(
        self, argv: list[Arg], command: Command | None = None, flow: Flow | None = None
    ) -> list[Finding]:
        """Findings for one simple command (already expanded)."""
        found = self._redirections(argv, command, flow) if command else []
        argv, wrapped = unwrap(argv)
        found += wrapped
        if not argv:
            return found
        self.command = command
        if command and reads_program_from_stdin(argv):
            found += self._stdin_code(argv, command)
        name = program_name(argv[0])
        if not name or "$" in name or (name not in ("[", "[[") and any(c in name for c in "*?[")):
            found.append(Finding("the program name is computed at run time", "dynamic command"))
            found += [f for f in rm_rule([Arg("rm"), *argv[1:]], self) if f.blocked]
        rule = rule_for(name)
        if rule is not None:
            found += rule(argv, self)
        elif "/" in argv[0] and not argv[0].startswith(_SYSTEM_PREFIXES):
            found += local_program(argv[0], self)
        return found

    def _redirections(self, argv: list[Arg], command: Command, flow: Flow | None) -> list[Finding]:
        """Writes through `>` are judged like write_file; what they write is remembered."""
        found = []
        for op, target in command.redirects:
            path = (self.expand(target) or [Arg("")])[0]
            if op in WRITE_REDIRECTS:
                found += write_target(path, self)
                written = output_of(unwrap(argv)[0], command, flow, self)
                if written.text is not None:
                    remember_write(path, written.text, self)
            elif op == "<":
                found += read_redirect(path, self)
        return found

    def _stdin_code(self, argv: list[Arg], command: Command) -> list[Finding]:
        """`bash <<EOF`, `python3 <<< CODE`: the program text is right here."""
        here_strings = [t for op, t in command.redirects if op == "<<<"]
        code = [command.heredoc] if command.heredoc else []
        code += [" ".join(self.expand(word)) for word in here_strings]
        name = program_name(argv[0])
        if name in SHELLS or name in ("source", "."):
            return [f for text in code for f in self.nested(text)]
        from talaria.policy.rules_code import inline_code

        return [f for text in code for f in inline_code(text, self, name)]

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
        """The fields bash would produce from `word` (unknown values stay as `${NAME}`;
        a substitution that decodes a literal payload becomes the decoded text)."""
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
                inner = self._substitution(part.text)
                fetched = fetched or inner.fetched
                current += inner.text if inner.fetched and inner.text is not None else "$(...)"
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

    def _substitution(self, src: str) -> Flow:
        """What `$( ... )` prints, as far as it can be known: downloads and decodes are
        marked fetched, a decoded literal payload is known exactly."""
        if self.depth >= MAX_DEPTH:
            return Flow(None, False)  # the nested scan already asks for approval of this depth
        inner = Scanner(src, self.depth + 1, self.env, self.cwd, ScanContext(self.ctx.base))
        result = Flow(None, False)
        for pipeline in parse(src):
            flow: Flow | None = None
            for command in pipeline:
                flow = output_of(unwrap(inner._expand_command(command))[0], command, flow, inner)
            if flow is not None:
                result = Flow(flow.text, result.fetched or flow.fetched)
        return result


def _fork_bomb(src: str) -> list[Finding]:
    """`:(){ :|:& };:` and friends: a function that pipes or backgrounds itself (outside
    quotes: `echo ':(){ :|:& };:'` only prints it; `bash -c '...'` is scanned when nested)."""
    src = _QUOTED.sub("''", src)
    for m in _FUNCTION_BODY.finditer(src):
        if m.group(2):
            name, body = m.group(2), m.group(3)
        else:
            before = _FUNCTION_NAME.search(src, max(0, m.start() - 80), m.start())
            name, body = (before.group(1) if before else ""), m.group(1)
        name = re.escape(name)
        if name and re.search(rf"(^|[\s;&|]){name}\s*[|&]\s*{name}", body):
            return [Finding("a fork bomb exhausts the machine", "fork bomb", blocked=True)]
    return []


def assess_command(
    command: str, cwd: Path | str | None = None, home: Path | None = None
) -> Assessment | None:
    """None when the command is safe; else why it needs approval, or that it is blocked.
    `cwd` lets scripts and relative paths be read; `home` is the talaria home.

    When a command does several dangerous things the pattern joins all of them, so a grant
    for one ("git push --force") never silently covers another in the same line.
    """
    context = ScanContext(str(cwd) if cwd is not None else None, home)
    findings = Scanner(command, ctx=context).scan()
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
