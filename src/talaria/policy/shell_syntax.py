"""Shell syntax, read the way bash reads it: words, operators, quotes, substitutions, heredocs.

Pure syntax with no opinion on safety (that is `command_safety`). It undoes quoting and
escapes (r''m, "r"m, \\rm, $'\\x72m') and keeps variables and substitutions as typed parts so
the caller can expand them with what it knows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_OPERATORS = (
    "&>>",
    "<<<",
    "<<-",
    ";;&",
    "&&",
    "||",
    "|&",
    ";;",
    ";&",
    ">>",
    ">|",
    "<<",
    "<>",
    ">&",
    "<&",
    "&>",
    "|",
    "&",
    ";",
    "(",
    ")",
    "<",
    ">",
)
REDIRECTS = frozenset({"&>>", "<<<", "<<-", ">>", ">|", "<<", "<>", ">&", "<&", "&>", "<", ">"})
WRITE_REDIRECTS = frozenset({"&>>", ">>", ">|", "<>", ">&", "&>", ">"})
_PIPES = frozenset({"|", "|&"})
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL_PARAM = re.compile(r"[0-9@*#?$!-]")
_PLAIN = re.compile(r"[^\s;&|()<>'\"\\$`]+")
_PLAIN_QUOTED = re.compile(r'[^"\\$`]+')


@dataclass(frozen=True, slots=True)
class Part:
    """One piece of a word: literal text, a variable, or a command/process substitution."""

    kind: str  # "lit" | "var" | "cmd" | "proc"
    text: str
    quoted: bool = False


@dataclass(slots=True)
class Word:
    parts: list[Part] = field(default_factory=list)

    def add(self, kind: str, text: str, quoted: bool) -> None:
        self.parts.append(Part(kind, text, quoted))

    def sealed(self) -> Word:
        """The same word with runs of literal text of one quoting merged (in linear time)."""
        merged: list[Part] = []
        run: list[str] = []
        for part in self.parts:
            if run and (part.kind != "lit" or part.quoted != merged[-1].quoted):
                merged[-1] = Part("lit", "".join(run), merged[-1].quoted)
                run = []
            if part.kind == "lit" and run:
                run.append(part.text)
                continue
            merged.append(part)
            if part.kind == "lit":
                run = [part.text]
        if run:
            merged[-1] = Part("lit", "".join(run), merged[-1].quoted)
        return Word(merged)

    def literal(self) -> str:
        return "".join(p.text for p in self.parts if p.kind == "lit")


@dataclass(slots=True)
class Command:
    words: list[Word] = field(default_factory=list)
    redirects: list[tuple[str, Word]] = field(default_factory=list)
    heredoc: str | None = None


class Lexer:
    """Splits a command line into words and operators the way bash reads them."""

    def __init__(self, src: str) -> None:
        self.s, self.i = src, 0
        self.tokens: list[Word | str] = []
        self.heredocs: list[str] = []
        self._pending: list[tuple[str, bool]] = []

    def run(self) -> list[Word | str]:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if s.startswith("\\\n", self.i):
                self.i += 2
            elif c in " \t\r":
                self.i += 1
            elif c == "\n":
                self.tokens.append("\n")
                self.i += 1
                self._read_heredocs()
            elif c == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
            elif (op := self._operator()) is not None:
                self.tokens.append(op)
            else:
                self._append_word(self._word())
        return self.tokens

    def _append_word(self, word: Word) -> None:
        text = word.literal()
        if text.isdigit() and len(word.parts) == 1 and self.s[self.i : self.i + 1] in ("<", ">"):
            return  # a file descriptor number such as the 2 in 2>&1
        previous = self.tokens[-1] if self.tokens else None
        if previous in ("<<", "<<-"):
            self._pending.append((text, previous == "<<-"))
        self.tokens.append(word)

    def _operator(self) -> str | None:
        if self.s.startswith(("<(", ">("), self.i):
            return None
        for op in _OPERATORS:
            if self.s.startswith(op, self.i):
                self.i += len(op)
                return op
        return None

    def _read_heredocs(self) -> None:
        for delimiter, strip_tabs in self._pending:
            lines: list[str] = []
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                line, self.i = self.s[self.i : end], end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                lines.append(line)
            self.heredocs.append("\n".join(lines))
        self._pending.clear()

    def _word(self) -> Word:
        word, s = Word(), self.s
        while self.i < len(s):
            c = s[self.i]
            if s.startswith(("<(", ">("), self.i):
                self.i += 2
                word.add("proc", self._balanced(), False)
            elif c in " \t\r\n;&|()<>":
                break
            elif c == "'":
                end = s.find("'", self.i + 1)
                end = len(s) if end < 0 else end
                word.add("lit", s[self.i + 1 : end], True)
                self.i = end + 1
            elif c == '"':
                self.i += 1
                self._double_quoted(word)
            elif c == "\\":
                if not s.startswith("\\\n", self.i):
                    word.add("lit", s[self.i + 1 : self.i + 2], True)
                self.i += 2
            elif c == "$":
                self._dollar(word, quoted=False)
            elif c == "`":
                word.add("cmd", self._backticks(), False)
            else:
                run = _PLAIN.match(s, self.i)
                end = run.end() if run else self.i + 1
                word.add("lit", s[self.i : end], False)
                self.i = end
        return word.sealed()

    def _double_quoted(self, word: Word) -> None:
        s = self.s
        while self.i < len(s) and s[self.i] != '"':
            c = s[self.i]
            if c == "\\" and s[self.i + 1 : self.i + 2] in ('"', "\\", "$", "`", "\n"):
                if s[self.i + 1] != "\n":
                    word.add("lit", s[self.i + 1], True)
                self.i += 2
            elif c == "$":
                self._dollar(word, quoted=True)
            elif c == "`":
                word.add("cmd", self._backticks(), True)
            else:
                run = _PLAIN_QUOTED.match(s, self.i)
                end = run.end() if run else self.i + 1
                word.add("lit", s[self.i : end], True)
                self.i = end
        self.i += 1

    def _dollar(self, word: Word, quoted: bool) -> None:
        s, i = self.s, self.i
        nxt = s[i + 1 : i + 2]
        if nxt == "'" and not quoted:
            end = i + 2
            while end < len(s) and s[end] != "'":
                end += 2 if s[end] == "\\" else 1
            word.add("lit", ansi_c(s[i + 2 : end]), True)
            self.i = end + 1
        elif nxt == '"' and not quoted:
            self.i += 2
            self._double_quoted(word)
        elif s.startswith("$((", i):
            self.i += 3
            word.add("lit", f"$(({self._balanced()})", True)
        elif nxt == "(":
            self.i += 2
            word.add("cmd", self._balanced(), quoted)
        elif nxt == "{":
            self.i += 2
            word.add("var", self._balanced("{", "}"), quoted)
        elif m := (NAME.match(s, i + 1) or _SPECIAL_PARAM.match(s, i + 1)):
            word.add("var", m.group(), quoted)
            self.i = m.end()
        else:
            word.add("lit", "$", quoted)
            self.i += 1

    def _balanced(self, open_: str = "(", close: str = ")") -> str:
        """The text up to the matching `close`, skipping quoted and escaped characters."""
        s, start, depth = self.s, self.i, 1
        while self.i < len(s):
            c = s[self.i]
            if c == "\\":
                self.i += 2
                continue
            if c in "'\"":
                end = s.find(c, self.i + 1)
                self.i = len(s) if end < 0 else end + 1
                continue
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    self.i += 1
                    return s[start : self.i - 1]
            self.i += 1
        return s[start:]

    def _backticks(self) -> str:
        s, out = self.s, []
        self.i += 1
        while self.i < len(s) and s[self.i] != "`":
            if s[self.i] == "\\" and s[self.i + 1 : self.i + 2] in ("`", "\\", "$"):
                self.i += 1
            out.append(s[self.i])
            self.i += 1
        self.i += 1
        return "".join(out)


_ANSI_C = re.compile(
    r"\\(?:([abeEfnrtv\\'\"?])|([0-7]{1,3})|x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})"
    r"|U([0-9A-Fa-f]{1,8})|c(.))",
    re.DOTALL,
)
_ANSI_C_SIMPLE = dict(zip("abeEfnrtv\\'\"?", "\a\b\x1b\x1b\f\n\r\t\v\\'\"?", strict=True))


def ansi_c(body: str) -> str:
    """What bash makes of $'...': its escapes as the bash manual lists them (\\n, \\e, \\cX,
    \\nnn with one to three octal digits, \\xHH with one or two hex digits, \\uHHHH and
    \\UHHHHHHHH with up to four and eight); any other backslash stays. A command spelled
    `$'\\x9\\x72\\x6d'` is judged as the tab and `rm` bash runs; a NUL ends the text there,
    as it does for bash."""
    return _ANSI_C.sub(_ansi_c_escape, body).partition("\0")[0]


def _ansi_c_escape(match: re.Match[str]) -> str:
    simple, octal, hex_byte, short, long, control = match.groups()
    if simple is not None:
        return _ANSI_C_SIMPLE[simple]
    if control is not None:
        return chr(ord(control) & 0x1F)
    if octal is not None:
        return chr(int(octal, 8) & 0xFF)
    code = int(hex_byte or short or long, 16)
    return chr(code) if code <= 0x10FFFF else match.group(0)


def parse(src: str) -> list[list[Command]]:
    """Pipelines (lists of simple commands joined by `|`) in the order bash would run them."""
    lexer = Lexer(src)
    tokens = lexer.run()
    heredocs = iter(lexer.heredocs)
    pipelines: list[list[Command]] = [[]]
    current = Command()

    def finish(new_pipeline: bool) -> None:
        nonlocal current
        if current.words or current.redirects:
            pipelines[-1].append(current)
        current = Command()
        if new_pipeline and pipelines[-1]:
            pipelines.append([])

    index, depth = 0, 0
    while index < len(tokens):
        token = tokens[index]
        if token == "(" and tokens[index + 1 : index + 2] == [")"] and _defines(current):
            current = Command()  # `f() { ...; }`: the name is not run here, the body follows
            index += 2
            continue
        if token == ")" and depth == 0:
            current = Command()  # a case pattern such as `*)` names nothing to run
            index += 1
            continue
        depth += {"(": 1, ")": -1}.get(token, 0) if isinstance(token, str) else 0
        if isinstance(token, Word):
            current.words.append(token)
        elif token in REDIRECTS:
            target = tokens[index + 1] if index + 1 < len(tokens) else None
            if isinstance(target, Word):
                index += 1
                if token in ("<<", "<<-"):
                    current.heredoc = next(heredocs, "")
                else:
                    current.redirects.append((token, target))
        else:
            finish(new_pipeline=token not in _PIPES and token not in "()")
        index += 1
    finish(new_pipeline=False)
    return [p for p in pipelines if p]


def _defines(command: Command) -> bool:
    """`f` or `function f` before `()`: a function definition."""
    words = [w.literal() for w in command.words]
    return not command.redirects and (len(words) == 1 or words[:1] == ["function"])
