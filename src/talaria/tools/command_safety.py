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

import os
import re
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from talaria.tools.approval import Assessment
from talaria.tools.sensitive_paths import classify_write, is_block_device
from talaria.tools.shell_syntax import NAME, WRITE_REDIRECTS, Command, Word, parse

MAX_DEPTH = 8

_KEYWORDS = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "!",
                       "{", "}", "esac"})
_DECLARERS = frozenset({"export", "declare", "typeset", "local", "readonly"})
_BRACE_LIST = re.compile(r"\{([^{}\s]*,[^{}\s]*)\}")
_FORK_BOMB_DEF = re.compile(
    r"(?:function\s+)?([^\s(){};|&<>]+)\s*\(\s*\)\s*\{(.*?)\}"
    r"|function\s+([^\s(){};|&<>]+)\s*\{(.*?)\}",
    re.S,
)
_FORK_LOOP = re.compile(r"fork\s+while\s+fork|while\s*\(?\s*(?:True|1)\s*\)?\s*:?\s*os\.fork\(\)")
_SQL_DANGER = re.compile(
    r"\b(drop\s+(database|schema|table)|truncate\b|flushall|flushdb|dropDatabase\s*\()", re.I
)
_PROTECTED_DIRS = frozenset({
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32",
    "/media", "/mnt", "/opt", "/proc", "/root", "/run", "/sbin", "/snap", "/srv", "/sys",
    "/usr", "/var", "/usr/bin", "/usr/sbin", "/usr/lib", "/usr/lib64", "/usr/local",
    "/usr/share", "/usr/include", "/var/lib", "/var/log", "/System", "/Library",
    "/Applications", "/Users", "/private",
})
"""Deleting (or chmod -R-ing) one of these, or its whole content, is never approvable."""

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh"})
_INTERPRETER = re.compile(r"(python|pypy)[\d.]*|perl|ruby|node|nodejs|php|lua|deno|bun")
_FETCHERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh"})
_DECODERS = frozenset({"base64", "base32", "xxd", "openssl", "uudecode", "gpg"})
_DB_CLIENTS = frozenset({"psql", "mysql", "mariadb", "sqlite3", "clickhouse-client", "mongo",
                         "mongosh", "redis-cli", "cqlsh", "sqlcmd", "duckdb"})

# wrapper name -> (options that take a value, positionals before the wrapped command)
_WRAPPERS: dict[str, tuple[frozenset[str], int]] = {
    "sudo": (frozenset({"-u", "-g", "-p", "-C", "-h", "-D", "-r", "-t", "-T", "-U", "--user",
                        "--group", "--prompt", "--close-from", "--chdir", "--host", "--role",
                        "--type", "--command-timeout", "--other-user"}), 0),
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
    "xargs": (frozenset({"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file",
                         "--delimiter", "--eof", "--replace", "--max-lines", "--max-args",
                         "--max-procs", "--max-chars", "--process-slot-var"}), 0),
    "busybox": (frozenset(), 0),
    "watch": (frozenset({"-n", "--interval"}), 0),
    "unbuffer": (frozenset(), 0),
}


class Finding(NamedTuple):
    reason: str
    pattern: str
    blocked: bool = False


class Arg(str):
    """A word after expansion; `fetched` marks text produced by a download or decode
    (`"$(curl ...)"`, `<(wget -O- ...)`), which must never be run as code unreviewed."""

    fetched: bool = False


Rule = Callable[[list[Arg], "Scanner"], list[Finding]]


def program_name(word: str) -> str:
    """`/usr/bin/rm` and `./rm` are `rm`."""
    return word.rsplit("/", 1)[-1] if "/" in word.rstrip("/") else word


def _is_assignment(arg: str) -> bool:
    name, eq, _ = arg.partition("=")
    return bool(eq) and NAME.fullmatch(name) is not None


def _short_flags(args: list[Arg]) -> str:
    """All letters of short option clusters before `--` (`-rf -v` -> "rfv")."""
    letters = []
    for a in args:
        if a == "--":
            break
        if a.startswith("-") and not a.startswith("--"):
            letters.append(a[1:])
    return "".join(letters)


def _positionals(args: list[Arg]) -> list[Arg]:
    out, options_done = [], False
    for a in args:
        if options_done or not a.startswith("-") or a == "-":
            out.append(a)
        elif a == "--":
            options_done = True
    return out


def _lookup(spec: str, env: dict[str, str]) -> str | None:
    """Resolve $NAME, ${NAME} and ${NAME:-default}; None when the value is unknown."""
    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?::?-(.*))?", spec, re.S)
    if m is None:
        return None
    return env.get(m.group(1), m.group(2))


class Scanner:
    """Walks one piece of shell code (and everything nested in it) collecting findings."""

    def __init__(self, src: str, depth: int = 0, env: dict[str, str] | None = None) -> None:
        self.src, self.depth = src, depth
        self.env = dict(env) if env is not None else {"IFS": " \t\n", "HOME": "~"}

    def nested(self, src: str) -> list[Finding]:
        if self.depth >= MAX_DEPTH:
            return [Finding("nested too deeply to check", "deep nesting")]
        return Scanner(src, self.depth + 1, self.env).scan()

    def scan(self) -> list[Finding]:
        found = _fork_bomb(self.src)
        for pipeline in parse(self.src):
            argvs = []
            for command in pipeline:
                argv = self._expand_command(command, found)
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
                found.append(_FETCHED_CODE)
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
                found += [f for arg in self.expand(target)[:1] for f in _write_target(arg)]
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
        if not name or "$" in name or any(c in name for c in "*?["):
            found.append(Finding("the program name is computed at run time", "dynamic command"))
            found += [f for f in _rm([Arg("rm"), *argv[1:]], self) if f.blocked]
        rule = _rule_for(name)
        if rule is not None:
            found += rule(argv, self)
        return found

    def _expand_command(self, command: Command, found: list[Finding]) -> list[Arg]:
        for word in [*command.words, *(target for _, target in command.redirects)]:
            for part in word.parts:
                if part.kind in ("cmd", "proc"):
                    found += self.nested(part.text)
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
        if len(word.parts) == 1 and word.parts[0].kind == "lit" and not word.parts[0].quoted:
            brace = _BRACE_LIST.fullmatch(word.parts[0].text)
            if brace is not None:
                return [Arg(item) for item in brace.group(1).split(",") if item]
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
        inner = Scanner(src, self.depth + 1, self.env)
        return any(
            is_fetcher(unwrap(inner._expand_command(command, []))[0])
            for pipeline in parse(src)
            for command in pipeline
        )


_FETCHED_CODE = Finding("runs downloaded or decoded code through an interpreter", "curl|sh")


def unwrap(argv: list[Arg]) -> tuple[list[Arg], list[Finding]]:
    """Strip sudo/env/timeout/... to reach the program that really runs."""
    found: list[Finding] = []
    while argv and (spec := _WRAPPERS.get(program_name(argv[0]))) is not None:
        name = program_name(argv[0])
        if name in ("sudo", "doas"):
            found.append(Finding(f"runs as root through {name}", "sudo"))
        if name == "command" and argv[1:2] in (["-v"], ["-V"]):
            return [], found
        with_value, positionals = spec
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
        rest = argv[i + positionals :]
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
    flags = _short_flags(argv[1:])
    return "d" in flags or "r" in flags or any(a in ("--decode", "-revert", "--decrypt")
                                               for a in argv[1:])


def _shell_payload(argv: list[Arg]) -> tuple[Arg | None, Arg | None, bool]:
    """(the -c code, the script path, reads-stdin flag -s) of a shell invocation."""
    command_mode, stdin_mode, i = False, False, 1
    while i < len(argv):
        a = argv[i]
        if a in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 2
            continue
        if a == "--":
            i += 1
            break
        if a.startswith(("-", "+")) and len(a) > 1:
            if not a.startswith("--"):
                command_mode = command_mode or "c" in a
                stdin_mode = stdin_mode or "s" in a
            i += 1
            continue
        break
    nxt = argv[i] if i < len(argv) else None
    return (nxt, None, stdin_mode) if command_mode else (None, nxt, stdin_mode)


def reads_program_from_stdin(argv: list[Arg]) -> bool:
    """`sh`, `bash -s`, `python3 -`, `source /dev/stdin`: the program text comes from the pipe."""
    if not argv:
        return False
    name = program_name(argv[0])
    if name in SHELLS:
        code, script, stdin_mode = _shell_payload(argv)
        return code is None and (stdin_mode or script in (None, "-", "/dev/stdin"))
    if _INTERPRETER.fullmatch(name):
        for a in argv[1:]:
            if a in ("-c", "-e", "-E", "-r", "-m", "-p"):
                return False
            if not a.startswith("-") or a == "-":
                return a in ("-", "/dev/stdin")
        return True
    return name in ("source", ".") and any(a in ("/dev/stdin", "-") for a in argv[1:])


def _protected(target: str) -> bool:
    import fnmatch

    expanded = os.path.expanduser(target)
    if not expanded.startswith("/"):
        return False
    protected = _PROTECTED_DIRS | {os.path.normpath(os.path.expanduser("~"))}
    path = re.sub("^/+", "/", expanded)
    base = path[:-2] if path.endswith(("/*", "/.")) else path
    if os.path.normpath(base) in protected:
        return True
    return any(c in path for c in "*?[") and any(fnmatch.fnmatch(p, path) for p in protected)


def _rm(argv: list[Arg], sc: Scanner) -> list[Finding]:
    flags = _short_flags(argv[1:])
    recursive = "r" in flags.lower() or "--recursive" in argv
    force = "f" in flags or "--force" in argv
    targets = _positionals(argv[1:])
    if recursive and ("--no-preserve-root" in argv or any(map(_protected, targets))):
        return [Finding("deletes the root, a system or a home directory", "rm -r /", True)]
    if recursive:
        return [Finding("deletes files recursively", "rm -r")]
    return [Finding("force-deletes files", "rm -f")] if force else []


def _write_target(text: str) -> list[Finding]:
    if not text or "$" in text or text.isdigit() or text == "-":
        return []
    path = os.path.expanduser(text)
    if not path.startswith("/"):
        return []
    if is_block_device(path):
        return [Finding(f"overwrites the disk device {path}", "write to disk", blocked=True)]
    verdict = classify_write(Path(path))
    return [Finding(*verdict)] if verdict else []


def _dd(argv: list[Arg], sc: Scanner) -> list[Finding]:
    return [f for a in argv[1:] if a.startswith("of=") for f in _write_target(a[3:])]


def _shell(argv: list[Arg], sc: Scanner) -> list[Finding]:
    code, script, _ = _shell_payload(argv)
    found = sc.nested(code) if code is not None else []
    if (code is not None and code.fetched) or (script is not None and script.fetched):
        found.append(_FETCHED_CODE)
    return found


def _interpreter(argv: list[Arg], sc: Scanner) -> list[Finding]:
    for i, a in enumerate(argv[1:], 1):
        if a in ("-c", "-e", "-E", "-r"):
            return [_FETCHED_CODE] if i + 1 < len(argv) and argv[i + 1].fetched else []
        if a == "-m":
            module = argv[i + 1 :]
            return _packages(module, sc) if module[:1] == ["pip"] else []
        if not a.startswith("-"):
            return [_FETCHED_CODE] if a.fetched else []
    return []


def _eval(argv: list[Arg], sc: Scanner) -> list[Finding]:
    found = sc.nested(" ".join(argv[1:]))
    return [*found, _FETCHED_CODE] if any(a.fetched for a in argv[1:]) else found


def _source(argv: list[Arg], sc: Scanner) -> list[Finding]:
    return [_FETCHED_CODE] if any(a.fetched for a in argv[1:]) else []


def _su(argv: list[Arg], sc: Scanner) -> list[Finding]:
    found = [Finding("runs as another user through su", "sudo")]
    for i, a in enumerate(argv[1:], 1):
        if a in ("-c", "--command") and i + 1 < len(argv):
            found += sc.nested(argv[i + 1])
        elif a.startswith("--command="):
            found += sc.nested(a.partition("=")[2])
    return found


_SSH_VALUE_OPTIONS = frozenset("bcDEeFIiJLlmOopQRSWw")


def _ssh(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`ssh host CMD...` runs CMD in the remote shell: check it like a local one."""
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        takes_value = len(argv[i]) == 2 and argv[i][1] in _SSH_VALUE_OPTIONS
        i += 2 if takes_value else 1
    remote = argv[i + 1 :]
    return sc.nested(" ".join(remote)) if remote else []


def _find(argv: list[Arg], sc: Scanner) -> list[Finding]:
    found, i = [], 1
    while i < len(argv):
        if argv[i] == "-delete":
            found.append(Finding("deletes every file find matches", "find -delete"))
        if argv[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(argv) and argv[end] not in (";", "+"):
                end += 1
            found += sc.check(argv[i + 1 : end])
            i = end
        i += 1
    return found


def _git(argv: list[Arg], sc: Scanner) -> list[Finding]:
    i = 1
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in ("-C", "-c", "--git-dir", "--work-tree", "--namespace") else 1
    sub, rest = (argv[i] if i < len(argv) else ""), argv[i + 1 :]
    flags = _short_flags(rest)
    if sub == "push" and ("f" in flags or any(
        a.startswith(("--force", "--mirror")) or a.startswith("+") for a in rest
    )):
        return [Finding("rewrites history on the remote", "git push --force")]
    if sub == "reset" and "--hard" in rest:
        return [Finding("discards uncommitted changes", "git reset --hard")]
    if sub == "clean" and ("f" in flags or "--force" in rest):
        return [Finding("deletes untracked files", "git clean -f")]
    if sub == "branch" and ("D" in flags or ("--delete" in rest and "--force" in rest)):
        return [Finding("deletes a branch that may not be merged", "git branch -D")]
    return []


def _chmod(argv: list[Arg], sc: Scanner) -> list[Finding]:
    positionals = _positionals(argv[1:])
    if "R" not in _short_flags(argv[1:]) and "--recursive" not in argv:
        return []
    if any(map(_protected, positionals[1:])):
        return [Finding("changes permissions of a whole system directory", "chmod -R /", True)]
    world = {"777", "0777", "666", "0666", "a+rwx", "ugo+rwx", "o+w", "a+w", "o+rwx"}
    if positionals[:1] and positionals[0] in world:
        return [Finding("makes files writable by everyone", "chmod -R 777")]
    return []


def _chown(argv: list[Arg], sc: Scanner) -> list[Finding]:
    if "R" not in _short_flags(argv[1:]) and "--recursive" not in argv:
        return []
    if any(map(_protected, _positionals(argv[1:])[1:])):
        return [Finding("changes the owner of a whole system directory", "chown -R /", True)]
    return [Finding("changes file owners recursively", "chown -R")]


def _kill(argv: list[Arg], sc: Scanner) -> list[Finding]:
    kill_signals = {"9", "KILL", "SIGKILL"}
    for i, a in enumerate(argv[1:], 1):
        value = argv[i + 1] if a in ("-s", "-n", "--signal") and i + 1 < len(argv) else a[1:]
        if a.startswith("--signal="):
            value = a.partition("=")[2]
        if a.startswith("-") and value.upper() in kill_signals:
            return [Finding("kills processes without letting them clean up", "kill -9")]
    return []


def _named(pattern: str, reason: str) -> Rule:
    return lambda argv, sc: [Finding(reason, pattern)]


def _blocked(pattern: str, reason: str) -> Rule:
    return lambda argv, sc: [Finding(reason, pattern, blocked=True)]


def _when_arg(pattern: str, reason: str, *triggers: str) -> Rule:
    """A finding when any argument (or a short option letter) is one of `triggers`."""
    def rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
        letters = _short_flags(argv[1:])
        hit = any(t in argv[1:] or (len(t) == 2 and t[0] == "-" and t[1] in letters)
                  for t in triggers)
        return [Finding(reason, pattern)] if hit else []
    return rule


def _first_positional(pattern: str, reason: str, *subcommands: str, blocked: bool = False) -> Rule:
    def rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
        positionals = _positionals(argv[1:])
        hit = bool(positionals) and positionals[0] in subcommands
        return [Finding(reason, pattern, blocked)] if hit else []
    return rule


_REMOVAL = "removes installed packages"
_REMOVERS: dict[str, tuple[str, ...]] = {
    "apt": ("remove", "purge", "autoremove", "autopurge"), "apt-get": ("remove", "purge",
    "autoremove"), "aptitude": ("remove", "purge"), "dnf": ("remove", "erase", "autoremove"),
    "yum": ("remove", "erase", "autoremove"), "zypper": ("remove", "rm"), "brew": ("uninstall",
    "remove", "rm"), "snap": ("remove",), "apk": ("del",), "conda": ("remove", "uninstall"),
    "mamba": ("remove", "uninstall"), "port": ("uninstall",),
}


def _packages(argv: list[Arg], sc: Scanner) -> list[Finding]:
    name, positionals = program_name(argv[0]), _positionals(argv[1:])
    if name in ("pip", "pip3", "uv") or name.startswith("pip3."):
        args = positionals[1:] if name == "uv" and positionals[:1] == ["pip"] else positionals
        unattended = "-y" in argv or "--yes" in argv or name == "uv"
        hit = args[:1] == ["uninstall"] and unattended
        return [Finding("uninstalls Python packages", "pip uninstall")] if hit else []
    if name == "pacman":
        hit = any(a.startswith("-R") or a == "--remove" for a in argv[1:])
    elif name == "dpkg":
        hit = any(a in ("-r", "-P", "--remove", "--purge") for a in argv[1:])
    else:
        hit = bool(positionals) and positionals[0] in _REMOVERS.get(name, ())
    return [Finding(_REMOVAL, "package removal")] if hit else []


def _docker(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`docker system prune` / `docker volume prune` delete data other projects rely on."""
    positionals = _positionals(argv[1:])
    if positionals[:2] in (["system", "prune"], ["volume", "prune"]):
        return [Finding("deletes containers, images or volumes", "docker prune")]
    return []


def _sql(argv: list[Arg], sc: Scanner) -> list[Finding]:
    hit = _SQL_DANGER.search(sc.src) is not None
    return [Finding("drops or empties database objects", "sql drop")] if hit else []


def _writes(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """tee FILE..., sed -i FILE...: every file argument is written."""
    name = program_name(argv[0])
    if name == "sed" and not (re.search(r"(^|\s)-[a-zA-Z]*i", " ".join(argv[1:]))
                              or any(a.startswith("--in-place") for a in argv)):
        return []
    return [f for a in _positionals(argv[1:]) for f in _write_target(a)]


def _copies(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """cp/mv/install/ln SRC... DEST: the destination is written."""
    for i, a in enumerate(argv[1:], 1):
        if a in ("-t", "--target-directory") and i + 1 < len(argv):
            return _write_target(argv[i + 1])
        if a.startswith("--target-directory="):
            return _write_target(a.partition("=")[2])
    positionals = _positionals(argv[1:])
    return _write_target(positionals[-1]) if len(positionals) >= 2 else []


_POWER = "turns the machine off or restarts it"
_RULES: dict[str, Rule] = {
    "rm": _rm, "dd": _dd, "git": _git, "chmod": _chmod, "chown": _chown, "chgrp": _chown,
    "kill": _kill, "find": _find, "ssh": _ssh, "eval": _eval, "source": _source, ".": _source, "su": _su,
    "tee": _writes, "sed": _writes, "cp": _copies, "mv": _copies, "install": _copies,
    "ln": _copies, "docker": _docker, "podman": _docker,
    "pkill": _named("pkill", "kills processes by name"),
    "killall": _named("killall", "kills processes by name"),
    "shred": _named("shred", "destroys file contents beyond recovery"),
    "dropdb": _named("sql drop", "drops a database"),
    "mysqladmin": _first_positional("sql drop", "drops a database", "drop"),
    "crontab": _when_arg("crontab -r", "deletes every cron job", "-r"),
    "iptables": _when_arg("firewall flush", "removes every firewall rule", "-F", "--flush"),
    "ip6tables": _when_arg("firewall flush", "removes every firewall rule", "-F", "--flush"),
    "nft": _when_arg("firewall flush", "removes every firewall rule", "flush"),
    "ufw": _first_positional("firewall flush", "turns the firewall off", "disable", "reset"),
    "history": _when_arg("history -c", "erases the shell history", "-c"),
    "systemctl": _first_positional("systemctl reboot", _POWER, "poweroff", "reboot", "halt",
                                   "kexec", "soft-reboot", blocked=True),
    "init": _first_positional("shutdown", _POWER, "0", "6", blocked=True),
    "telinit": _first_positional("shutdown", _POWER, "0", "6", blocked=True),
}
for _name in ("shutdown", "reboot", "halt", "poweroff"):
    _RULES[_name] = _blocked("shutdown", _POWER)
for _name in ("mkfs", "mke2fs", "mkswap", "wipefs"):
    _RULES[_name] = _blocked("mkfs", "formats a disk, destroying its data")
for _name in ("fdisk", "sfdisk", "parted", "gdisk", "sgdisk", "cfdisk"):
    _RULES[_name] = _named("partition disk", "rewrites a disk's partition table")
for _name in (*_REMOVERS, "pacman", "dpkg", "pip", "pip3", "uv"):
    _RULES[_name] = _packages


def _rule_for(name: str) -> Rule | None:
    if name in _RULES:
        return _RULES[name]
    if name in SHELLS:
        return _shell
    if name in _DB_CLIENTS:
        return _sql
    if name.startswith(("mkfs.", "mkfs_")):
        return _RULES["mkfs"]
    if name.startswith("pip3."):
        return _packages
    return _interpreter if _INTERPRETER.fullmatch(name) else None


def _fork_bomb(src: str) -> list[Finding]:
    for m in _FORK_BOMB_DEF.finditer(src):
        name = re.escape(m.group(1) or m.group(3))
        body = (m.group(2) if m.group(1) else m.group(4)) or ""
        if re.search(rf"(^|[\s;&|]){name}\s*[|&]\s*{name}", body):
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
