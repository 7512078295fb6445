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

import shlex
from pathlib import Path

from talaria.policy.approval import Assessment
from talaria.policy.command_flow import Flow, output_of, piped_code, reads_program_from_stdin
from talaria.policy.command_rules import rm_rule, rule_for
from talaria.policy.command_words import SHELLS, Arg, Finding, ScanContext, program_name
from talaria.policy.command_wrappers import XARGS_INPUT, unwrap
from talaria.policy.expansion import BRACE_LIST, expand_braces, lookup, positional, split_fields
from talaria.policy.functions import definitions, fork_bomb
from talaria.policy.known_safe import is_known_safe
from talaria.policy.rules_code import local_program
from talaria.policy.rules_env import assignment_findings
from talaria.policy.rules_files import (
    READERS,
    read_redirect,
    remember_write,
    secret_reads,
    write_target,
    write_targets,
)
from talaria.policy.shell_syntax import NAME, WRITE_REDIRECTS, Command, Part, Word, parse
from talaria.policy.verdict import ASK, FLOOR, SAFE, UNKNOWN, Verdict, assessment_for

MAX_DEPTH = 8

_KEYWORDS = frozenset(
    {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!", "{", "}", "esac"}
)
_DECLARERS = frozenset({"export", "declare", "typeset", "local", "readonly"})
_LOOPS = frozenset({"for", "select"})
_SYSTEM_PREFIXES = ("/usr/", "/bin/", "/sbin/", "/lib", "/opt/", "/nix/", "/snap/", "/System/")


def _is_assignment(arg: str) -> bool:
    name, eq, _ = arg.partition("=")
    return bool(eq) and NAME.fullmatch(name) is not None


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
        self.cwd_dynamic = False
        """An earlier `cd` went somewhere known only at run time (`cd "$DIR"`)."""
        self.env = dict(env) if env is not None else {"IFS": " \t\n", "HOME": "~"}
        self.command: Command | None = None
        """The simple command being judged (rules read its heredoc and redirections)."""
        self.piped_text: list[str] = []
        """What an earlier command of the pipeline writes into it, when that is known."""
        self.stdin_unknown = False
        """An earlier command of the pipeline writes into it, and what cannot be known."""
        self.piped_sources: tuple[str, ...] = ()
        """Directories whose paths an earlier command of the pipeline lists into it."""
        self.assignments: list[Arg] = []
        """The `NAME=value` words of the command being expanded (`export` ones too)."""

    def nested(self, src: str, args: list[Arg] | None = None) -> list[Finding]:
        """Findings for code this line runs (`sh -c`, `eval`, a function body); `args` are
        its positional parameters when they are known."""
        if self.depth >= MAX_DEPTH:
            return [Finding("nested too deeply to check", "deep nesting")]
        env = self.env if args is None else {**self.env, **positional(args)}
        inner = Scanner(src, self.depth + 1, env, self.cwd, self.ctx)
        inner.cwd_dynamic = self.cwd_dynamic
        return inner.scan()

    def scan(self) -> list[Finding]:
        functions = definitions(self.src)
        self.ctx.functions.update(functions)
        found = fork_bomb(functions)
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
                found += assignment_findings(self.assignments, self)
                self.piped_text = [flow.text] if flow is not None and flow.text else []
                self.stdin_unknown = flow is not None and flow.text is None
                self.piped_sources = flow.sources if flow is not None else ()
                found += self.check(argv, command, flow)
                real = unwrap(argv).argv
                if flow is not None and reads_program_from_stdin(real):
                    found += piped_code(real, flow, self)
                flow = output_of(real, command, flow, self)
        return found

    def check(
        self, argv: list[Arg], command: Command | None = None, flow: Flow | None = None
    ) -> list[Finding]:
        """Findings for one simple command (already expanded)."""
        found = self._redirections(argv, command, flow) if command else []
        stdin = [Arg(w) for text in self.piped_text for w in _xargs_words(text)] or None
        stripped = unwrap(argv, stdin)
        argv = stripped.argv
        found += stripped.found + write_targets(stripped.logs, self)
        found += assignment_findings(stripped.assignments, self)
        if not argv:
            return found
        self.command = command
        if command and reads_program_from_stdin(argv):
            found += self._stdin_code(argv, command)
        name = program_name(argv[0])
        if name in READERS and any(a.dynamic and a == XARGS_INPUT for a in argv):
            found += secret_reads([Arg(s) for s in self.piped_sources], self, recursive=True)
        if argv[0] in self.ctx.functions:
            return found + self._call(argv)
        if not name or "$" in name or (name not in ("[", "[[") and any(c in name for c in "*?[")):
            found.append(Finding("the program name is computed at run time", "dynamic command"))
            found += [f for f in rm_rule([Arg("rm"), *argv[1:]], self) if f.blocked]
        rule = rule_for(name)
        if rule is not None:
            found += rule(argv, self)
        local = "/" in argv[0] and not argv[0].startswith(_SYSTEM_PREFIXES)
        if local and rule is None:
            found += local_program(argv[0], self)
        if local or not is_known_safe(name, argv):
            self.ctx.unknown.append(name)
        return found

    def _call(self, argv: list[Arg]) -> list[Finding]:
        """A function (or alias) this line defined: its body, with the call's arguments as
        `$1`...; a recursive call is not expanded again (the body is being judged)."""
        name = argv[0]
        if name in self.ctx.calling:
            return []
        self.ctx.calling.add(name)
        try:
            return self.nested(self.ctx.functions[name], argv[1:])
        finally:
            self.ctx.calling.discard(name)

    def _redirections(self, argv: list[Arg], command: Command, flow: Flow | None) -> list[Finding]:
        """Writes through `>` are judged like write_file; what they write is remembered."""
        found: list[Finding] = []
        for op, target in command.redirects:
            path = (self.expand(target) or [Arg("")])[0]
            if op in WRITE_REDIRECTS:
                found += write_target(path, self)
                written = output_of(unwrap(argv).argv, command, flow, self)
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
        while argv and argv[0] in (*_KEYWORDS, "coproc", "function"):
            # `function f {`, `coproc NAME { ...; }`: the name is not a program
            named = argv[0] == "function" or (argv[0] == "coproc" and argv[2:3] == ["{"])
            argv = argv[2:] if named else argv[1:]
        if argv[:1] == ["case"]:
            return []
        if argv[:1] and argv[0] in _LOOPS:
            self.env.pop(argv[1] if len(argv) > 1 else "", None)  # the loop variable varies
            return []
        count = 0
        while count < len(argv) and _is_assignment(argv[count]):
            count += 1
        self.assignments = argv[:count]
        if count == len(argv) or argv[count] in _DECLARERS:
            self.assignments = list(filter(_is_assignment, argv))
            for assignment in self.assignments:
                name, _, value = assignment.partition("=")
                self.env[name] = value
            return []
        return argv[count:]

    def expand(self, word: Word) -> list[Arg]:
        """The fields bash would produce from `word` (unknown values stay as `${NAME}` or
        `$(...)` and mark the word dynamic; a substitution whose output is known, such as
        `$(echo ~)` or a decoded literal payload, becomes that text)."""
        first = word.parts[0] if len(word.parts) == 1 else None
        if first and first.kind == "lit" and not first.quoted and BRACE_LIST.fullmatch(first.text):
            return [Arg(w) for w in expand_braces(first.text) if w]
        fields: list[str] = []
        current, fetched, dynamic, quoted = "", False, False, False
        for part in word.parts:
            quoted = quoted or part.quoted
            if part.kind == "lit":
                current += part.text
                continue
            value, placeholder, from_download = self._value(part)
            fetched = fetched or from_download
            if value is None:
                current += placeholder
                dynamic = dynamic or part.kind != "proc"
                continue
            whole = part.quoted or from_download
            for k, piece in enumerate(split_fields(value, self.env.get("IFS"), whole)):
                if k and (current or part.quoted):
                    fields.append(current)
                    current = ""
                current += piece
        if current or quoted:
            fields.append(current)
        args = [Arg(f) for f in fields]
        for arg in args:
            arg.fetched, arg.dynamic = fetched, dynamic
        return args

    def _value(self, part: Part) -> tuple[str | None, str, bool]:
        """(the text a variable or substitution stands for or None, the placeholder shown
        when it is unknown, whether it is downloaded or decoded)."""
        if part.kind == "var":
            return lookup(part.text, self.env), "${" + part.text + "}", False
        inner = self._substitution(part.text)
        if inner.text is None or (part.kind == "proc" and not inner.fetched):
            return None, "$(...)", inner.fetched  # <(cmd) is a /dev/fd path, not the text
        return inner.text.rstrip("\n"), "$(...)", inner.fetched

    def _substitution(self, src: str) -> Flow:
        """What `$( ... )` prints, as far as it can be known: downloads and decodes are
        marked fetched; the text of `echo`, `printf` and decoded literals is known exactly."""
        if self.depth >= MAX_DEPTH:
            return Flow(None, False)  # the nested scan already asks for approval of this depth
        inner = Scanner(src, self.depth + 1, self.env, self.cwd, ScanContext(self.ctx.base))
        texts: list[str | None] = []
        fetched = False
        for pipeline in parse(src):
            flow: Flow | None = None
            for command in pipeline:
                flow = output_of(unwrap(inner._expand_command(command)).argv, command, flow, inner)
            if flow is not None:
                texts.append(flow.text)
                fetched = fetched or flow.fetched
        known = [t for t in texts if t is not None]
        return Flow("\n".join(known) if len(known) == len(texts) else None, fetched)


def _xargs_words(text: str) -> list[str]:
    """The words xargs reads from `text`: split at blanks, quotes and backslashes honoured
    (`echo "'rm -rf ~'" | xargs sh -c` hands sh one word)."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def judge_command(command: str, cwd: Path | str | None = None, home: Path | None = None) -> Verdict:
    """The policy's verdict on a command line: safe, unknown, ask or floor. `cwd` lets
    scripts and relative paths be read; `home` is the talaria home.

    When a command does several dangerous things the pattern joins all of them, so a grant
    for one ("git push --force") never silently covers another in the same line.
    """
    context = ScanContext(str(cwd) if cwd is not None else None, home)
    findings = Scanner(command, ctx=context).scan()
    if not findings:
        unknown = tuple(dict.fromkeys(context.unknown))
        return Verdict(UNKNOWN, unknown=unknown) if unknown else Verdict(SAFE)
    blocked = [f for f in findings if f.blocked]
    chosen = blocked or findings
    return Verdict(
        FLOOR if blocked else ASK,
        reason="; ".join(dict.fromkeys(f.reason for f in chosen)),
        pattern=" + ".join(sorted({f.pattern for f in chosen})),
        unresolved=not blocked and any(f.unresolved for f in findings),
    )


def assess_command(
    command: str,
    cwd: Path | str | None = None,
    home: Path | None = None,
    sandboxed: bool = True,
) -> Assessment | None:
    """None when the command may run without asking; else why it needs approval, or that
    it is blocked. `sandboxed`: whether it will run inside the sandbox."""
    return assessment_for(command, judge_command(command, cwd, home), sandboxed)
