"""Programs that run another program: strip them to judge what really runs.

`sudo rm -rf /`, `taskset -c 0 rm -rf /` and `flock /tmp/l -c 'rm -rf /'` are `rm -rf /`. Each
wrapper names the options that take a value, how many operands come before the wrapped
command (taskset's CPU mask, chroot's directory), and the option, if any, whose value is a
shell command line.
"""

from __future__ import annotations

import shlex
from typing import NamedTuple

from talaria.policy.command_words import Arg, Finding, computed, option_value, program_name
from talaria.policy.shell_syntax import NAME


class Wrapper(NamedTuple):
    with_value: frozenset[str] = frozenset()
    leading: int = 0
    command_option: str | None = None
    """An option whose value is a command line run by a shell (`flock -c CMD`)."""
    pid_option: str | None = None
    """An option that makes the wrapper act on a running process instead (`taskset -p`)."""


def _w(
    values: str = "",
    leading: int = 0,
    command_option: str | None = None,
    pid_option: str | None = None,
) -> Wrapper:
    return Wrapper(frozenset(values.split()), leading, command_option, pid_option)


_SUDO_VALUES = (
    "-u -g -p -C -h -D -r -t -T -U --user --group --prompt --close-from --chdir --host --role "
    "--type --command-timeout --other-user"
)
_XARGS_VALUES = (
    "-a -d -E -I -L -n -P -s --arg-file --delimiter --eof --replace --max-lines --max-args "
    "--max-procs --max-chars --process-slot-var"
)
WRAPPERS: dict[str, Wrapper] = {
    "sudo": _w(_SUDO_VALUES),
    "doas": _w("-u -C"),
    "pkexec": _w("--user"),
    "env": _w("-u --unset -C --chdir"),
    "nice": _w("-n --adjustment"),
    "ionice": _w("-c -n -p -P -u --class --classdata"),
    "chrt": _w("-T -P -D --sched-runtime --sched-period --sched-deadline", 1, None, "-p"),
    "taskset": _w("", 1, None, "-p"),
    "numactl": _w("-N -m -C -i -p -P --cpunodebind --membind --physcpubind --interleave"),
    "cpulimit": _w("-l -p -e --limit --pid --exe", 0, None, "-p"),
    "prlimit": _w("-p --pid", 0, None, "-p"),
    "timeout": _w("-s -k --signal --kill-after", 1),
    "nohup": _w(),
    "setsid": _w(),
    "command": _w(),
    "exec": _w("-a"),
    "builtin": _w(),
    "time": _w("-f -o --format --output"),
    "stdbuf": _w("-i -o -e --input --output --error"),
    "unbuffer": _w(),
    "xargs": _w(_XARGS_VALUES),
    "busybox": _w(),
    "watch": _w("-n --interval -d"),
    "flock": _w("-w -E --timeout --conflict-exit-code", 1, "-c"),
    "chroot": _w("--userspec --groups", 1),
    "unshare": _w("-S -G --setuid --setgid --wd --root"),
    "nsenter": _w("-t -S -G --target --setuid --setgid --wd --root"),
    "setpriv": _w("--reuid --regid --groups --inh-caps --ambient-caps --bounding-set"),
    "runuser": _w("-u -g -G --user --group --supp-group", 0, "-c"),
    "sg": _w("", 1, "-c"),
    "script": _w("-t -T -I -O -E --timing --log-in --log-out --echo", 0, "-c"),
    "systemd-run": _w("-p -u -M -E --unit --property --machine --setenv --description --slice"),
    "strace": _w("-o -e -p -s -u -E -a -b -I -O -P -S -X"),
    "ltrace": _w("-o -e -p -s -u -E -a -n"),
    "fakeroot": _w("-l -s -i --lib --faked"),
    "eatmydata": _w(),
    "nocache": _w(),
    "torsocks": _w("-u -p -a -P"),
    "proxychains": _w("-f"),
    "proxychains4": _w("-f"),
    "firejail": _w(),
    "xvfb-run": _w("-n -s -f -e -p --server-num --server-args --auth-file --error-file"),
    "dbus-run-session": _w("--config-file --dbus-daemon"),
    "catchsegv": _w(),
    "chpst": _w("-u -U -e -n -l -L -m -d -o -p -f -c"),
    "rlwrap": _w("-a -f -H -l -p -P -s -S"),
    "caffeinate": _w("-t -w"),
    "trickle": _w("-u -d -w -t -l -n"),
    "faketime": _w("-f"),
    "with-contenv": _w(),
}


def _split(text: str) -> list[Arg]:
    try:
        return [Arg(word) for word in shlex.split(text)]
    except ValueError:
        return [Arg(word) for word in text.split()]


def _is_command_option(arg: str, spec: Wrapper) -> bool:
    """`-c`, `--command`, or a cluster ending in it (`script -qc CMD`)."""
    option = spec.command_option
    if option is None:
        return False
    cluster = arg.startswith("-") and not arg.startswith("--") and arg.endswith(option[1])
    return arg in (option, "--command") or cluster


def _assigns(word: str) -> bool:
    """`NAME=value`, or an exported function `BASH_FUNC_name%%=() { ...; }`."""
    name, eq, _ = word.partition("=")
    return bool(eq) and (NAME.fullmatch(name) is not None or name.startswith("BASH_FUNC_"))


def _skip_options(name: str, argv: list[Arg], spec: Wrapper) -> tuple[int, list[Arg] | None]:
    """Index of the first operand, and the command a `-c`/`env -S` option carries."""
    i = 1
    while i < len(argv):
        a = argv[i]
        if a == "--":
            return i + 1, None
        if name == "env" and a.startswith(("-S", "--split-string")):
            if a in ("-S", "--split-string"):
                return i + 2, _split(argv[i + 1] if i + 1 < len(argv) else "")
            return i + 1, _split(a.partition("=")[2] if "=" in a else a[2:])
        if _is_command_option(a, spec):
            code = argv[i + 1] if i + 1 < len(argv) else Arg("")
            return len(argv), [Arg("sh"), Arg("-c"), code]
        if a.startswith("-") and len(a) > 1:
            i += 2 if a in spec.with_value else 1
        elif name in ("sudo", "doas", "env") and _assigns(a):
            i += 1
        else:
            break
    return i, None


XARGS_INPUT = "${stdin}"
"""The word xargs adds when what it reads cannot be known."""


def _xargs_command(options: list[Arg], command: list[Arg], stdin: list[Arg] | None) -> list[Arg]:
    """The command xargs runs: its words plus what it reads (`stdin`, when the line shows
    it; else a word known only at run time), or with them in place of `-I` replace-str."""
    words = stdin or [computed(XARGS_INPUT)]
    command = command or [Arg("echo")]
    replace = option_value([Arg("xargs"), *options], "-I", "--replace", "-i")
    if replace is None and any(a in ("-i", "--replace") for a in options):
        replace = Arg("{}")
    if replace is None:
        return [*command, *words]
    line = " ".join(words)
    filled = []
    for word in command:
        arg = Arg(word.replace(replace, line)) if replace in word else word
        arg.dynamic = word.dynamic or (replace in word and any(w.dynamic for w in words))
        filled.append(arg)
    return filled


_OUTPUT_OPTIONS = {
    "strace": ("-o",),
    "ltrace": ("-o",),
    "time": ("-o", "--output"),
    "script": ("-O", "--log-out", "-I", "--log-in", "-T", "--timing", "-B", "--log-io"),
}
"""Wrappers that write a log of what they run: `script -c CMD ~/.bashrc` writes there."""


def _outputs(name: str, argv: list[Arg], spec: Wrapper) -> list[Arg]:
    """The files a wrapper writes its log to (script's operands included)."""
    found = [v for v in (option_value(argv, o) for o in _OUTPUT_OPTIONS.get(name, ())) if v]
    i = 1
    while name == "script" and i < len(argv):
        a = argv[i]
        if a in spec.with_value or _is_command_option(a, spec):
            i += 2
            continue
        if not a.startswith("-"):
            found.append(a)
        i += 1
    return found


class Unwrapped(NamedTuple):
    """What is left once the wrappers are stripped, and what the wrappers did themselves."""

    argv: list[Arg]
    found: list[Finding]
    logs: list[Arg]
    """Files the wrappers write (`strace -o FILE`, `script -c CMD FILE`)."""
    assignments: list[Arg]
    """Variables the wrappers set for the command (`env BASH_ENV=f sh`, `sudo X=1 cmd`)."""


def unwrap(argv: list[Arg], stdin: list[Arg] | None = None) -> Unwrapped:
    """Strip sudo/env/timeout/taskset/... to reach the program that really runs. `stdin`:
    the words piped into the command, which xargs appends to the one it runs."""
    found: list[Finding] = []
    logs: list[Arg] = []
    assignments: list[Arg] = []
    while argv and (spec := WRAPPERS.get(program_name(argv[0]))) is not None:
        name = program_name(argv[0])
        if name in ("sudo", "doas", "pkexec"):
            found.append(Finding(f"runs as root through {name}", "sudo"))
        if name == "command" and argv[1:2] in (["-v"], ["-V"]):
            return Unwrapped([], found, logs, assignments)
        if spec.pid_option and spec.pid_option in argv[1:]:
            return Unwrapped([], found, logs, assignments)  # acts on a running process
        logs += _outputs(name, argv, spec)
        i, carried = _skip_options(name, argv, spec)
        assignments += [a for a in argv[1:i] if _assigns(a)]
        if carried is None and spec.leading:
            i += spec.leading  # flock FILE -c CMD: the command option may follow the operands
            if i < len(argv) and _is_command_option(argv[i], spec):
                carried, i = [Arg("sh"), Arg("-c"), *argv[i + 1 : i + 2]], len(argv)
        command = carried + argv[i:] if carried is not None else argv[i:]
        if name == "xargs":
            command = _xargs_command(argv[1:i], command, stdin)
        argv = command
    return Unwrapped(argv, found, logs, assignments)
