"""The rules: which programs, with which arguments, need approval or are blocked outright.

`command_safety` reads the shell and hands each simple command (expanded, wrappers stripped)
to the rule registered for its program name here. A rule returns findings; an empty list
means the program is harmless with those arguments. Rules for code runners, files and the
machine itself live in `rules_code`, `rules_files` and `rules_system`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from talaria.policy import (
    rules_code,
    rules_editors,
    rules_files,
    rules_git,
    rules_runners,
    rules_shell,
    rules_system,
)
from talaria.policy.command_words import (
    INTERPRETER,
    SHELLS,
    Arg,
    Finding,
    Rule,
    absolute,
    computed,
    only_lists,
    operands,
    program_name,
    protected,
    short_flags,
    top_level,
)

if TYPE_CHECKING:
    from talaria.policy.command_safety import Scanner


def _cd(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """Follow `cd` so that `cd / && rm -rf *` is seen for what it is."""
    target = (operands(argv[1:]) or [Arg("~")])[0]
    known = target != "-" and "$" not in target and not target.dynamic
    path = os.path.join(sc.cwd or "", os.path.expanduser(target)) if known else ""
    sc.cwd = os.path.normpath(path) if path.startswith("/") else None
    sc.cwd_dynamic = not known or (sc.cwd_dynamic and sc.cwd is None)
    return []


def computed_targets(targets: list[Arg], sc: Scanner) -> bool:
    """Is any target known only at run time (`"$(cat list)"`, what xargs reads, a relative
    path after `cd "$DIR"`)?"""
    return any(t.dynamic or (sc.cwd_dynamic and not t.startswith(("/", "~"))) for t in targets)


def rm_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    flags = short_flags(argv[1:])
    recursive = "r" in flags.lower() or "--recursive" in argv
    force = "f" in flags or "--force" in argv
    targets = operands(argv[1:])
    hits_protected = any(protected(t, sc.cwd) for t in targets)
    if recursive and ("--no-preserve-root" in argv or hits_protected):
        return [Finding("deletes the root, a system or a home directory", "rm -r /", True)]
    if recursive and computed_targets(targets, sc):
        reason = "deletes recursively what is known only at run time"
        return [Finding(reason, "rm -r", unresolved=True)]
    if recursive:
        return [Finding("deletes files recursively", "rm -r")]
    return [Finding("force-deletes files", "rm -f")] if force else []


def _su(argv: list[Arg], sc: Scanner) -> list[Finding]:
    found = [Finding("runs as another user through su", "sudo")]
    for i, a in enumerate(argv[1:], 1):
        if a in ("-c", "--command") and i + 1 < len(argv):
            found += sc.nested(argv[i + 1])
        elif a.startswith("--command="):
            found += sc.nested(a.partition("=")[2])
    return found


def _find(argv: list[Arg], sc: Scanner) -> list[Finding]:
    """-delete and -exec rm below the root or a system directory are the hard floor; what
    `-exec cat` reads and `-fprint` writes is judged like any read or write."""
    found, touched, i = [], [], 1
    while i < len(argv) and not argv[i].startswith(("-", "(", "!")):
        i += 1
    start_end = i
    whole_system = any(top_level(start, sc.cwd) for start in argv[1:i])
    starts = argv[1:start_end] or [Arg(".")]
    while i < len(argv):
        if argv[i] == "-delete":
            found.append(Finding("deletes every file find matches", "find -delete"))
        if argv[i] in ("-fprint", "-fprint0", "-fprintf", "-fls") and i + 1 < len(argv):
            touched += rules_files.write_target(argv[i + 1], sc)
        if argv[i] in ("-exec", "-execdir", "-ok", "-okdir"):
            end = i + 1
            while end < len(argv) and argv[end] not in (";", "+"):
                end += 1
            inner = [computed(a) if a == "{}" else a for a in argv[i + 1 : end]]
            found += sc.check(inner)
            inner_name = program_name(inner[0]) if inner else ""
            if inner_name in ("rm", "shred"):
                found.append(Finding("deletes every file find matches", "find -delete"))
            if inner_name in rules_files.READERS or inner_name in SHELLS:
                touched += rules_files.secret_reads(starts, sc, recursive=True)
            i = end
        i += 1
    if whole_system and found:
        return [Finding("deletes files across a system directory", "find / -delete", True)]
    if found and computed_targets(argv[1:start_end], sc):
        reason = "deletes files below a directory known only at run time"
        found.append(Finding(reason, "find -delete", unresolved=True))
    return found + touched


def _chmod(argv: list[Arg], sc: Scanner) -> list[Finding]:
    positionals = operands(argv[1:])
    mode = positionals[0] if positionals else ""
    if "+x" in mode or mode in ("755", "0755", "775", "0775", "700", "0700", "+rx"):
        sc.ctx.executable.update(p for t in positionals[1:] if (p := absolute(t, sc)))
    if "R" not in short_flags(argv[1:]) and "--recursive" not in argv:
        return []
    if any(protected(t, sc.cwd) for t in positionals[1:]):
        return [Finding("changes permissions of a whole system directory", "chmod -R /", True)]
    world = {"777", "0777", "666", "0666", "a+rwx", "ugo+rwx", "o+w", "a+w", "o+rwx"}
    if positionals[:1] and positionals[0] in world:
        return [Finding("makes files writable by everyone", "chmod -R 777")]
    if computed_targets(positionals[1:], sc):
        reason = "changes permissions recursively below what is known only at run time"
        return [Finding(reason, "chmod -R", unresolved=True)]
    return []


def _chown(argv: list[Arg], sc: Scanner) -> list[Finding]:
    if "R" not in short_flags(argv[1:]) and "--recursive" not in argv:
        return []
    targets = operands(argv[1:])[1:]
    if any(protected(t, sc.cwd) for t in targets):
        return [Finding("changes the owner of a whole system directory", "chown -R /", True)]
    unresolved = computed_targets(targets, sc)
    return [Finding("changes file owners recursively", "chown -R", unresolved=unresolved)]


def _named(pattern: str, reason: str) -> Rule:
    return lambda argv, sc: [] if only_lists(argv) else [Finding(reason, pattern)]


def _blocked(pattern: str, reason: str) -> Rule:
    return lambda argv, sc: [] if only_lists(argv) else [Finding(reason, pattern, blocked=True)]


def _when_arg(pattern: str, reason: str, *triggers: str) -> Rule:
    """A finding when any argument (or a short option letter) is one of `triggers`."""

    def rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
        letters = short_flags(argv[1:])
        hit = any(
            t in argv[1:] or (len(t) == 2 and t[0] == "-" and t[1] in letters) for t in triggers
        )
        return [Finding(reason, pattern)] if hit else []

    return rule


def _first_positional(pattern: str, reason: str, *subcommands: str, blocked: bool = False) -> Rule:
    def rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
        positionals = operands(argv[1:])
        hit = bool(positionals) and positionals[0] in subcommands
        return [Finding(reason, pattern, blocked)] if hit else []

    return rule


_REMOVAL = "removes installed packages"
_REMOVERS: dict[str, tuple[str, ...]] = {
    "apt": ("remove", "purge", "autoremove", "autopurge"),
    "apt-get": ("remove", "purge", "autoremove"),
    "aptitude": ("remove", "purge"),
    "dnf": ("remove", "erase", "autoremove"),
    "yum": ("remove", "erase", "autoremove"),
    "zypper": ("remove", "rm"),
    "brew": ("uninstall", "remove", "rm"),
    "snap": ("remove",),
    "apk": ("del",),
    "conda": ("remove", "uninstall"),
    "mamba": ("remove", "uninstall"),
    "port": ("uninstall",),
}


def packages_rule(argv: list[Arg], sc: Scanner) -> list[Finding]:
    name, positionals = program_name(argv[0]), operands(argv[1:])
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
    positionals = operands(argv[1:])
    if positionals[:2] in (["system", "prune"], ["volume", "prune"]):
        return [Finding("deletes containers, images or volumes", "docker prune")]
    return []


_POWER = "turns the machine off or restarts it"
_RULES: dict[str, Rule] = {
    "rm": rm_rule,
    "dd": rules_files.dd_rule,
    "git": rules_git.git_rule,
    "chmod": _chmod,
    "chown": _chown,
    "chgrp": _chown,
    "kill": rules_system.kill_rule,
    "find": _find,
    "ssh": rules_runners.ssh_rule,
    "tar": rules_runners.tar_rule,
    "man": rules_runners.man_rule,
    "less": rules_runners.pager_rule,
    "more": rules_runners.pager_rule,
    "most": rules_runners.pager_rule,
    "make": rules_runners.make_rule,
    "gmake": rules_runners.make_rule,
    "ed": rules_editors.ed_rule,
    "red": rules_editors.ed_rule,
    "mawk": rules_code.awk_rule,
    "nawk": rules_code.awk_rule,
    "cd": _cd,
    "eval": rules_code.eval_rule,
    "alias": rules_shell.alias_rule,
    "unalias": rules_shell.unalias_rule,
    "trap": rules_shell.trap_rule,
    "source": rules_code.source_rule,
    ".": rules_code.source_rule,
    "awk": rules_code.awk_rule,
    "gawk": rules_code.awk_rule,
    "su": _su,
    "tee": rules_files.writes_rule,
    "sponge": rules_files.writes_rule,
    "sed": rules_editors.sed_rule,
    "truncate": rules_files.truncate_rule,
    "curl": rules_files.download_rule,
    "wget": rules_files.download_rule,
    "docker": _docker,
    "podman": _docker,
    "pkill": rules_system.kill_by_name,
    "killall": rules_system.kill_by_name,
    "killall5": rules_system.kill_by_name,
    "shred": rules_system.shred_rule,
    "nvme": rules_system.device_erase_rule,
    "hdparm": rules_system.device_erase_rule,
    "cryptsetup": rules_system.device_erase_rule,
    "dropdb": _named("sql drop", "drops a database"),
    "mysqladmin": _first_positional("sql drop", "drops a database", "drop"),
    "crontab": _when_arg("crontab -r", "deletes every cron job", "-r"),
    "iptables": _when_arg("firewall flush", "removes every firewall rule", "-F", "--flush"),
    "ip6tables": _when_arg("firewall flush", "removes every firewall rule", "-F", "--flush"),
    "nft": _when_arg("firewall flush", "removes every firewall rule", "flush"),
    "ufw": _first_positional("firewall flush", "turns the firewall off", "disable", "reset"),
    "history": _when_arg("history -c", "erases the shell history", "-c"),
    "systemctl": _first_positional(
        "systemctl reboot",
        _POWER,
        "poweroff",
        "reboot",
        "halt",
        "kexec",
        "soft-reboot",
        blocked=True,
    ),
    "init": _first_positional("shutdown", _POWER, "0", "6", blocked=True),
    "telinit": _first_positional("shutdown", _POWER, "0", "6", blocked=True),
}
for _name in rules_files.READERS:
    _RULES.setdefault(_name, rules_files.reads_rule)
for _name in ("cp", "mv", "install", "ln"):
    _RULES[_name] = rules_files.copies_rule
for _name in ("rsync", "scp", "sftp"):
    _RULES[_name] = rules_runners.remote_copy_rule
for _name in ("vi", "vim", "nvim", "view", "ex", "gvim", "vimdiff", "rvim", "rview"):
    _RULES[_name] = rules_editors.vim_rule
for _name in ("shutdown", "reboot", "halt", "poweroff"):
    _RULES[_name] = _blocked("shutdown", _POWER)
for _name in ("mkfs", "mke2fs", "mkswap", "wipefs", "blkdiscard", "mkntfs", "mkdosfs", "newfs"):
    _RULES[_name] = rules_system.wipe_rule
for _name in ("fdisk", "sfdisk", "parted", "gdisk", "sgdisk", "cfdisk"):
    _RULES[_name] = rules_system.partition_rule
for _name in ("lvremove", "vgremove", "pvremove", "zpool", "zfs", "mdadm", "badblocks"):
    _RULES[_name] = rules_system.volume_rule
for _name in rules_system.DB_CLIENTS:
    _RULES[_name] = rules_system.sql_rule
for _name in (*_REMOVERS, "pacman", "dpkg", "pip", "pip3", "uv"):
    _RULES[_name] = packages_rule


def rule_for(name: str) -> Rule | None:
    if name in _RULES:
        return _RULES[name]
    if name in SHELLS:
        return rules_code.shell_rule
    if name.startswith("mkfs."):
        return rules_system.wipe_rule
    if name.startswith("pip3."):
        return packages_rule
    return rules_code.interpreter_rule if INTERPRETER.fullmatch(name) else None
