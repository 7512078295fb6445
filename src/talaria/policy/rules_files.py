"""Rules for commands that write files, read secrets, or download what may later run.

A write through the terminal (`>`, `tee`, `cp`, `mv`, `install`, `sed -i`, `perl -i`,
`curl -o`) is judged by the same table as `write_file`, relative paths included; a read of a
secret (`cat .env`, `grep key ~/.netrc`, `< config.yaml`) asks like `read_file` does. What a
line writes or downloads is remembered, so that running it later in the same line is judged
by that text, or asks.
"""

from __future__ import annotations

import glob
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from talaria.policy.command_words import (
    Arg,
    Finding,
    absolute,
    operands,
    option_value,
    program_name,
    short_flags,
)
from talaria.policy.secret_files import secret_reason
from talaria.policy.sensitive_paths import classify_write, is_block_device, talaria_settings

if TYPE_CHECKING:
    from talaria.policy.command_safety import Scanner

READERS = frozenset(
    {
        "cat", "tac", "less", "more", "most", "head", "tail", "bat", "batcat", "nl", "od",
        "xxd", "hexdump", "hd", "strings", "base64", "base32", "grep", "egrep", "fgrep", "rg",
        "ag", "ack", "sed", "awk", "gawk", "cut", "sort", "uniq", "jq", "yq", "diff", "cmp",
        "view", "vi", "vim", "nano", "emacs", "paste", "fold", "fmt", "column", "tar", "zip",
        "gzip", "openssl", "scp", "rsync", "rev", "iconv", "expand", "unexpand", "pr", "shuf",
        "zcat", "bzcat", "xzcat", "zstdcat", "lz4cat", "gunzip", "bunzip2", "unxz", "zless",
        "zmore", "zgrep", "bzip2", "xz", "zstd", "lz4", "7z", "basenc", "uuencode", "hexyl",
        "sdiff", "split", "csplit", "dos2unix", "unix2dos", "gpg", "nc", "ncat", "socat",
        "mawk", "look", "sftp",
    }
)  # fmt: skip
"""Programs whose file operands end up printed, copied, sent or loaded (`source .env`)."""
_RECURSIVE = frozenset({"rg", "ag", "ack", "tar", "7z", "zip"})
"""Readers that read whole directories given as operands (others do with -r, -R or -a)."""
_SECRET_DIRS = (".ssh", ".aws", ".gnupg", ".password-store", ".kube", ".docker", ".config/gcloud")
"""Below the user's home: directories of keys and credentials, whatever their files are
called (a private key need not be named id_*)."""
_PUBLIC_SSH = re.compile(r".*\.pub|known_hosts.*|authorized_keys2?|config")
_PATTERN_FIRST = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "sed", "awk", "gawk"})
_MAX_GLOB = 200
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://", re.I)


_STREAM = re.compile(r"/dev/(null|zero|full|stdout|stderr|stdin|tty|fd/\d+)|/proc/self/fd/\d+")
"""The command's own streams and sinks: writing there writes no file (whatever talaria's
own stdout happens to be, which is where a resolved /dev/stdout would point)."""
_PROJECT_SETTINGS = frozenset({"config.yaml", "config.yml"})


def write_target(text: str, sc: Scanner) -> list[Finding]:
    """Findings for writing the path `text` (relative paths against the line's directory).
    Any write to a file makes the line unknown: not harmful, but not read-only either."""
    if not text or text.isdigit() or text == "-" or _STREAM.fullmatch(text):
        return []
    sc.ctx.unknown.append(f"writes {text}")
    path = None if "$" in text or getattr(text, "dynamic", False) else absolute(text, sc)
    if path is None:
        return []
    sc.ctx.written.pop(path, None)
    sc.ctx.rewritten.add(path)
    if is_block_device(path):
        return [Finding(f"overwrites the disk device {path}", "write to disk", blocked=True)]
    settings = talaria_settings(Path(path), sc.ctx.talaria_home)
    if settings is not None:
        return [Finding(*settings)]
    verdict = classify_write(Path(path))
    return [Finding(*verdict)] if verdict else _project_settings(path, sc)


def _project_settings(path: str, sc: Scanner) -> list[Finding]:
    """A project's `.env` or `config.yaml` holds its keys and settings: rewriting one from
    the terminal asks, as it would through write_file (`config.yaml.bak` does not)."""
    secret = secret_reason(path, sc.ctx.talaria_home)
    if secret is None and os.path.basename(path) not in _PROJECT_SETTINGS:
        return []
    what = secret or f"a project's settings ({path})"
    return [Finding(f"changes {what}", "write project env/config")]


def write_targets(targets: list[Arg], sc: Scanner) -> list[Finding]:
    return [f for target in targets for f in write_target(target, sc)]


def remember_write(target: str, text: str, sc: Scanner) -> None:
    """`echo TEXT > f`: a later `sh f` in the same line runs TEXT."""
    path = absolute(target, sc)
    if path is not None:
        sc.ctx.rewritten.discard(path)
        sc.ctx.written[path] = text


def dd_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`of=` is written; `if=` is read (a secret, or a whole disk device)."""
    found = [f for a in argv[1:] if a.startswith("of=") for f in write_target(a[3:], sc)]
    for source in (Arg(a[3:]) for a in argv[1:] if a.startswith("if=")):
        found += secret_reads([source], sc)
        if is_block_device(absolute(source, sc) or ""):
            found.append(Finding(f"reads the whole disk device {source}", "read secrets"))
    return found


def writes_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """tee FILE..., sponge FILE: every file operand is written."""
    return write_targets(operands(argv[1:]), sc)


def copies_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """cp/mv/install/ln/rsync SRC... DEST: the destination is written, a secret source read."""
    found = reads_rule(argv, sc)
    target = option_value(argv, "-t", "--target-directory")
    if target is not None:
        return found + write_target(target, sc)
    positionals = operands(argv[1:])
    remote = len(positionals) >= 2 and ":" in positionals[-1].split("/", 1)[0]
    if len(positionals) >= 2 and not remote:
        found += write_target(positionals[-1], sc)
    return found


def truncate_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    return write_targets(operands(argv[1:]), sc)


def download_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """`curl -o f URL`, `wget URL`: the file is written, and remembered as downloaded."""
    name = program_name(argv[0])
    urls = [a for a in operands(argv[1:]) if _URL.match(a) or "." in a]
    if name == "wget":
        output = option_value(argv, "-O", "--output-document")
        named = [output] if output is not None else [Arg(_remote_name(u)) for u in urls]
    else:
        output = option_value(argv, "-o", "--output")
        remote = "-O" in argv[1:] or "--remote-name" in argv[1:]
        named = [output] if output is not None else []
        named += [Arg(_remote_name(u)) for u in urls] if remote else []
    found = reads_rule([argv[0], *_uploads(argv)], sc)
    for target in named:
        if target and target != "-":
            found += write_target(target, sc)
            if (path := absolute(target, sc)) is not None:
                sc.ctx.downloaded.add(path)
    return found


def _remote_name(url: str) -> str:
    return url.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


def _uploads(argv: list[Arg]) -> list[Arg]:
    """Files curl sends: `-d @file`, `--data-binary @file`, `-T file`, `-F x=@file`."""
    sent = []
    for i, a in enumerate(argv[1:], 1):
        value = argv[i + 1] if i + 1 < len(argv) else ""
        if a in ("-T", "--upload-file"):
            sent.append(Arg(value))
        elif a.startswith(("-d", "--data", "-F", "--form")) and "@" in (a + value):
            sent.append(Arg((a + " " + value).rsplit("@", 1)[-1].split(";")[0]))
    return sent


def reads_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """Reading a secret file into the output (or a copy) asks, as `read_file` would; so
    does reading a directory that holds keys, or one above it, recursively."""
    name = program_name(argv[0])
    files = operands(argv[1:])
    if name in _PATTERN_FIRST and not {"-e", "-f", "--regexp"} & set(argv):
        files = files[1:]  # grep PATTERN FILE...: the pattern is not a file
    recursive = (
        name in _RECURSIVE or "--recursive" in argv or bool(set(short_flags(argv[1:])) & set("rRa"))
    )
    return secret_reads(files, sc, recursive)


def secret_reads(files: list[Arg], sc: Scanner, recursive: bool = False) -> list[Finding]:
    reasons = [r for a in files for r in _secret_reasons(a, sc, recursive)]
    return [Finding(f"reads {r}", "read secrets") for r in dict.fromkeys(reasons)]


def read_redirect(target: str, sc: Scanner) -> list[Finding]:
    """`cmd < .env` reads the file whatever cmd is."""
    return secret_reads([Arg(target)], sc)


def _secret_reasons(word: Arg, sc: Scanner, recursive: bool = False) -> list[str]:
    if not word or "$" in word or _URL.match(word):
        return []
    path = absolute(word, sc)
    if path is None:
        return []
    paths = [path]
    if any(c in word for c in "*?["):
        paths = glob.glob(path, include_hidden=True)[:_MAX_GLOB]
    reasons = [secret_reason(p, sc.ctx.talaria_home) or _in_secret_dir(p, recursive) for p in paths]
    return [r for r in reasons if r is not None]


def _in_secret_dir(path: str, recursive: bool) -> str | None:
    """A file in a credentials directory, or (read recursively) such a directory or one
    that holds it: the home, `/`."""
    home = os.path.expanduser("~")
    for form in dict.fromkeys([path, os.path.realpath(path)]):
        for root in (os.path.join(home, d) for d in _SECRET_DIRS):
            below = form[len(root) + 1 :] if form.startswith(root + "/") else None
            if below and not (root.endswith(".ssh") and _PUBLIC_SSH.fullmatch(below)):
                return f"a file in the credentials directory {root} ({form})"
            if recursive and (form == root or root.startswith(form.rstrip("/") + "/")):
                return f"the credentials directory {root}, recursively ({form})"
    return None
