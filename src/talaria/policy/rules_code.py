"""Rules for programs that run code: shells, interpreters, `eval`, `source`, script files.

What will run is judged by its text wherever the text can be had: `sh f` and `./f` read the
script (or the text this same line wrote into it), `echo B64 | base64 -d | sh` decodes the
payload, `python -c` code is searched for the shell commands and deletions it makes. Text
that cannot be had (a download, a script not written yet) asks; inline interpreter code
always asks, because finding nothing in opaque code does not make it safe.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
import shlex
from typing import TYPE_CHECKING

from talaria.policy.command_words import (
    FETCHED_CODE,
    INTERPRETER,
    SHELLS,
    Arg,
    Finding,
    absolute,
    program_name,
    protected,
    read_text,
    shell_payload,
)
from talaria.policy.shell_syntax import ansi_c

if TYPE_CHECKING:
    from talaria.policy.command_safety import Scanner

MAX_SCRIPT_BYTES = 256_000
INLINE_CODE = "inline code"
_CODE_FLAGS = frozenset({"-c", "-e", "-E", "-p", "--eval", "--print", "--command", "-Command"})
_VALUE_FLAGS = frozenset({"-W", "-X", "-I", "-M", "-x", "--require", "-r"})
_RUNS_SHELL = re.compile(
    r"\b(system|popen|subprocess|spawn\w*|exec\w*|check_output|check_call|shell_exec|passthru)\b"
    r"|`[^`]+`|%x[{(]"
)
_STRING_LITERAL = re.compile(r"'((?:[^'\\]|\\.)*)'|\"((?:[^\"\\]|\\.)*)\"")
_STRING_LIST = re.compile(r"[\[(]\s*((?:'[^']*'|\"[^\"]*\")(?:\s*,\s*(?:'[^']*'|\"[^\"]*\"))+)")
_JOINT = re.compile(r"\s*(?:\+|\.|\.\.|<<)\s*")
_HOME_EXPR = re.compile(
    r"os\.path\.expanduser\(\s*['\"]~['\"]\s*\)|(?:pathlib\.)?Path\.home\(\)"
    r"|os\.environ(?:\.get\(|\[)\s*['\"]HOME['\"]\s*[\])]|(?:os\.)?getenv\(\s*['\"]HOME['\"]\s*\)"
    r"|\$ENV\{\s*['\"]?HOME['\"]?\s*\}|process\.env\.HOME|Dir\.home"
    r"|(?:require\(\s*['\"]os['\"]\s*\)|os)\.homedir\(\)"
    r"|ENV\[\s*['\"]HOME['\"]\s*\]|Deno\.env\.get\(\s*['\"]HOME['\"]\s*\)"
)
_PERL_QUOTE = re.compile(r"\bqq?\s*(?:\{([^{}]*)\}|\(([^()]*)\)|\[([^\[\]]*)\]|\|([^|]*)\|)")
_DELETE_TREE = re.compile(
    r"\b(?:rmtree|remove_tree|rm_rf|rm_r|rmSync|rmdirSync|rimraf|emptyDirSync|removeSync)"
    r"\s*\(\s*(?:'([^']*)'|\"([^\"]*)\")"
)
_FORK_LOOP = re.compile(r"fork\s+while\s+fork|while\s*\(?\s*(?:True|1)\s*\)?\s*:?\s*os\.fork\(\)")
_DECODES = re.compile(r"b64decode|base64|atob|decode64|unpack\(\s*['\"]m")
_BASE64_TEXT = re.compile(r"[A-Za-z0-9+/]{8,}={0,2}")
_ECHO_FLAGS = re.compile(r"-[neE]+")
_SHEBANG = re.compile(rb"#!\s*(\S+)(?:[ \t]+(\S+))?")


def _normalise(code: str) -> str:
    """Perl's q{}/qq{} as plain strings, and every way of naming the home directory as "~"
    (inside a string, as in qq{rm -rf $ENV{HOME}}, or as a string of its own)."""
    code = _HOME_EXPR.sub("\x00", code)
    code = _PERL_QUOTE.sub(lambda m: '"' + next(g for g in m.groups() if g is not None) + '"', code)
    code = _STRING_LITERAL.sub(lambda m: m.group(0).replace("\x00", "~"), code)
    return code.replace("\x00", '"~"')


def code_strings(code: str) -> list[str]:
    """The strings a program builds: literals joined by + or ., and lists of literals
    (`["rm", "-rf", "/"]`, `system("rm", "-rf", $ENV{HOME})`) as one command line."""
    code = _normalise(code)
    pieces: list[str] = []
    position, current = 0, None
    for m in _STRING_LITERAL.finditer(code):
        text = m.group(1) if m.group(1) is not None else m.group(2)
        if current is not None and _JOINT.fullmatch(code[position : m.start()]):
            current += text
        else:
            if current is not None:
                pieces.append(current)
            current = text
        position = m.end()
    if current is not None:
        pieces.append(current)
    for m in _STRING_LIST.finditer(code):
        words = [a or b for a, b in _STRING_LITERAL.findall(m.group(1))]
        pieces.append(shlex.join(words))
    return pieces


def _decoded_literals(code: str) -> list[str]:
    """Base64 literals in code that decodes them, as text."""
    texts = []
    for m in _BASE64_TEXT.finditer(code):
        try:
            raw = base64.b64decode(m.group(), validate=True)
            texts.append(raw.decode("utf-8"))
        except (binascii.Error, ValueError):
            continue
    return [t for t in texts if t.isprintable() or "\n" in t]


def code_findings(code: Arg | str, sc: Scanner) -> list[Finding]:
    """What a piece of interpreter code is seen to do: the shell commands it runs, the trees
    it deletes, fork loops, and decoded payloads."""
    found = [FETCHED_CODE] if getattr(code, "fetched", False) else []
    if _FORK_LOOP.search(code):
        found.append(Finding("a fork bomb exhausts the machine", "fork bomb", blocked=True))
    if _RUNS_SHELL.search(code):
        found += [f for text in code_strings(code) for f in sc.nested(text)]
    if _DECODES.search(code):
        for text in _decoded_literals(code):
            found += [FETCHED_CODE, *sc.nested(text)]
    for m in _DELETE_TREE.finditer(_normalise(code)):
        target = m.group(1) if m.group(1) is not None else m.group(2)
        if protected(target, sc.cwd):
            found.append(Finding("deletes the root, a system or a home directory", "rm -r /", True))
        else:
            found.append(Finding("deletes files recursively", "rm -r"))
    return found


def inline_code(code: Arg | str, sc: Scanner, language: str) -> list[Finding]:
    """`python -c CODE`, `node -e`, a heredoc to perl: opaque code asks, whatever it shows."""
    found = code_findings(code, sc)
    reason = f"runs inline {language} code that cannot be checked"
    return [*found, Finding(reason, INLINE_CODE)]


def opaque(what: str) -> Finding:
    """Code a program will run that cannot be read here: asked about, like inline code."""
    return Finding(f"runs {what}, which cannot be checked", INLINE_CODE)


def stdin_texts(sc: Scanner) -> tuple[list[str], bool]:
    """(what the command being judged reads on stdin: its here-document, here-strings,
    `< FILE` and the text piped into it; whether part of it cannot be known)."""
    command = sc.command
    texts = [command.heredoc] if command is not None and command.heredoc else []
    unknown = sc.stdin_unknown
    for op, target in command.redirects if command is not None else []:
        if op == "<<<":
            texts.append(" ".join(sc.expand(target)))
        elif op == "<":
            text = read_text(" ".join(sc.expand(target)), sc)
            unknown = unknown or text is None
            texts += [text] if text is not None else []
    return texts + sc.piped_text, unknown


def read_script(path_arg: Arg, sc: Scanner) -> tuple[str | None, list[Finding]]:
    """The text of a script about to run, or the finding that says why it cannot be had."""
    if path_arg.fetched:
        return None, [FETCHED_CODE]
    path = absolute(path_arg, sc)
    if path is not None and path in sc.ctx.downloaded:
        return None, [FETCHED_CODE]
    if path is not None and path in sc.ctx.written:
        return sc.ctx.written[path], []
    unreadable = Finding(
        f"runs the script {path_arg}, which cannot be read to check it before it runs",
        "unreadable script",
    )
    if path is None or path in sc.ctx.rewritten or not os.path.isfile(path):
        return None, [unreadable]  # a FIFO or device would stall the check: never opened
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_SCRIPT_BYTES + 1)
    except OSError:
        return None, [unreadable]
    if len(data) > MAX_SCRIPT_BYTES:
        return None, [
            Finding(f"runs the script {path_arg}, too long to check", "unreadable script")
        ]
    return data.decode("utf-8", errors="replace"), []


def shell_script(path_arg: Arg, sc: Scanner) -> list[Finding]:
    """`sh f`, `. f`: the script is judged as if its lines were typed here."""
    text, found = read_script(path_arg, sc)
    return found if text is None else sc.nested(text)


def interpreter_script(path_arg: Arg, sc: Scanner) -> list[Finding]:
    """`python f.py`: its code is searched like inline code; one that cannot be read asks."""
    text, found = read_script(path_arg, sc)
    return found if text is None else code_findings(text, sc)


def local_program(word: Arg, sc: Scanner) -> list[Finding]:
    """`./f`, `scripts/deploy`: a script is judged by its interpreter line; a compiled
    program (nothing to read) is left to the sandbox."""
    path = absolute(word, sc)
    if path is not None and path in sc.ctx.executable:
        reason = f"runs {word}, which this same command has just made executable"
        return [Finding(reason, "chmod +x and run")]
    text, found = read_script(word, sc)
    if text is None:
        return found
    shebang = _SHEBANG.match(text.encode("utf-8", "replace"))
    if text.startswith("\x7fELF") or "\x00" in text[:1024]:
        return []
    if shebang is None:
        return sc.nested(text)  # bash runs a file without an interpreter line as a script
    program = program_name(shebang.group(1).decode())
    if program == "env" and shebang.group(2):
        program = program_name(shebang.group(2).decode())
    if program in SHELLS:
        return sc.nested(text)
    return code_findings(text, sc) if INTERPRETER.fullmatch(program) else []


def shell_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`sh -c CODE NAME ARGS...` runs CODE with ARGS as `$1`...; `sh FILE` runs the file."""
    code, script, _ = shell_payload(argv)
    found = []
    if code is not None:
        after = argv[argv.index(code) + 1 :]
        found = sc.nested(code, after[1:] if after else None)
    if (code is not None and code.fetched) or (script is not None and script.fetched):
        found.append(FETCHED_CODE)
    elif script is not None and script not in ("-", "/dev/stdin"):
        found += shell_script(script, sc)
    return found


def interpreter_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    name = program_name(argv[0])
    language = re.sub(r"[\d.]+$", "", name) or name
    if language in ("deno", "bun"):
        return _deno_bun(argv, sc, language)
    edits = _perl_in_place(argv, sc) if language == "perl" else []
    code_flags = _CODE_FLAGS | ({"-r"} if language == "php" else set())
    i = 1
    while i < len(argv):
        a = argv[i]
        cluster = a.startswith("-") and not a.startswith("--") and len(a) > 2
        if a in code_flags or (cluster and a[-1] in "ce"):
            code = argv[i + 1] if i + 1 < len(argv) else Arg("")
            return [*edits, *inline_code(code, sc, language)]
        if a == "-m":
            return [*edits, *_module(argv[i + 1 :], sc, language)]
        if not a.startswith("-"):
            return [*edits, *interpreter_script(a, sc)]
        i += 2 if a in _VALUE_FLAGS else 1
    return edits


_STATEMENT_MODULES = frozenset({"timeit"})
"""`python -m timeit -s SETUP STMT`: every argument is code it runs."""
_SCRIPT_MODULES = {"cProfile": {"-o", "-s"}, "profile": {"-o", "-s"}, "pdb": {"-c"}, "trace": set()}
"""Modules that run a script named after their own options (with those options' values)."""


def _module(args: list[Arg], sc: Scanner, language: str) -> list[Finding]:
    """`python -m MODULE ARGS`: pip is judged as pip; timeit runs its arguments as code;
    cProfile, profile, pdb and trace run a script, which is read."""
    module, rest = (args[0] if args else ""), args[1:]
    if module == "pip":
        from talaria.policy.command_rules import packages_rule

        return packages_rule(args, sc)
    if module in _STATEMENT_MODULES:
        statements = [a for a in rest if not a.startswith("-") or a.startswith("--setup=")]
        return inline_code("\n".join(statements), sc, f"{language} (timeit)")
    values = _SCRIPT_MODULES.get(module)
    i = 0
    while values is not None and i < len(rest):
        if rest[i] in values or rest[i] == "-m":
            i += 2
        elif rest[i].startswith("-"):
            i += 1
        else:
            return interpreter_script(rest[i], sc)
    return []


def _perl_in_place(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`perl -pi -e CODE FILES`: the files are rewritten."""
    flags = [a for a in argv[1:] if a.startswith("-") and not a.startswith("--")]
    if not any("i" in a[1:] for a in flags):
        return []
    from talaria.policy.rules_files import write_targets

    code_given = any(a[-1] in "eE" for a in flags)
    files = [a for a in argv[1:] if not a.startswith("-")][1 if code_given else 0 :]
    return write_targets(files, sc)


def _deno_bun(argv: list[Arg], sc: Scanner, language: str) -> list[Finding]:
    """`deno eval CODE`, `bun -e CODE`, `deno run URL`, `bun run file.ts` or a package script."""
    args = [a for a in argv[1:] if not a.startswith("-") or a in ("-e", "--eval", "-p", "--print")]
    if args[:1] in (["eval"], ["-e"], ["--eval"], ["-p"], ["--print"]):
        return inline_code(args[1] if len(args) > 1 else Arg(""), sc, language)
    target = args[1] if args[:1] == ["run"] and len(args) > 1 else (args[0] if args else None)
    if target is None:
        return []
    if target.fetched or target.startswith(("http://", "https://", "npm:", "jsr:")):
        return [FETCHED_CODE]
    path = absolute(target, sc)
    exists = path is not None and (os.path.isfile(path) or path in sc.ctx.written)
    return interpreter_script(target, sc) if exists else []


def eval_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    found = sc.nested(" ".join(argv[1:]))
    return [*found, FETCHED_CODE] if any(a.fetched for a in argv[1:]) else found


def source_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`. f` and `source f` run the file in this shell."""
    if any(a.fetched for a in argv[1:]):
        return [FETCHED_CODE]
    script = argv[1] if len(argv) > 1 else None
    if script is None or script in ("/dev/stdin", "-"):
        return []
    return shell_script(script, sc)


_AWK_RUNS = re.compile(r"\bsystem\s*\(|\||@load")


def awk_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """awk's system(), pipes and extensions run shell commands or load code; its program
    is the first operand, or the `-f` files and `-e` texts."""
    from talaria.policy.rules_files import reads_rule

    programs: list[str | None] = []
    for k, a in enumerate(argv[1:], 1):
        value = argv[k + 1] if k + 1 < len(argv) else Arg("")
        if a in ("-f", "--file", "-i", "--include"):
            programs.append(read_text(value, sc))
        elif a in ("-e", "--source"):
            programs.append(value)
    if not programs:
        programs.append(next((a for a in argv[1:] if not a.startswith("-")), ""))
    found = reads_rule(argv, sc)
    for program in programs:
        if program is None:
            found.append(opaque("an awk program that cannot be read"))
        elif _AWK_RUNS.search(program):
            found += inline_code(program, sc, "awk")
    return found


def printed_text(argv: list[Arg]) -> str:
    """What `echo ARGS` / `printf FORMAT` writes (escapes decoded for printf and echo -e)."""
    name = program_name(argv[0])
    words, escapes = list(argv[1:]), name == "printf"
    if name == "printf":
        words = words[2:] if words[:1] == ["-v"] else words  # printf -v NAME prints nothing
        words = words[1:] if words[:1] == ["--"] else words
    while name != "printf" and words and _ECHO_FLAGS.fullmatch(words[0]):
        escapes = escapes or "e" in words.pop(0)  # only -n, -e, -E: `echo -1` prints -1
    return ansi_c(" ".join(words)) if escapes else " ".join(words)


def decode(text: str, argv: list[Arg]) -> str | None:
    """What a decoder (base64 -d, base32 -d, xxd -r -p, rev) makes of `text`; None when the
    decoder or the input is not understood."""
    name = program_name(argv[0])
    try:
        if name == "base64":
            raw = base64.b64decode("".join(text.split()), validate=False)
        elif name == "base32":
            raw = base64.b32decode("".join(text.split()))
        elif name == "xxd" and ("-p" in argv[1:] or "-ps" in argv[1:]):
            raw = binascii.unhexlify("".join(text.split()))
        elif name == "rev":
            return "\n".join(line[::-1] for line in text.splitlines())
        else:
            return None
    except (binascii.Error, ValueError):
        return None
    return raw.decode("utf-8", errors="replace")


def is_code_runner(name: str) -> bool:
    return name in SHELLS or INTERPRETER.fullmatch(name) is not None
