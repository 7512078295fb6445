"""Network off means off: a seccomp filter that leaves a sandboxed command no socket that
reaches outside it.

`--unshare-net` gives a command its own network namespace (loopback only), which cuts TCP,
UDP and abstract Unix sockets. It does not cut Unix sockets that are files: the whole file
system is visible, so a PostgreSQL, Docker or D-Bus socket there could be connected to and
made to run code outside the sandbox. Sockets can appear anywhere (a workspace, a home, /run)
at any time, so hiding them by mounts cannot be complete; denying the socket families is.
With `sandbox.network: false` bubblewrap loads this filter (`--seccomp`):

- `socket()` is allowed for AF_INET, AF_INET6 (the private loopback) and AF_NETLINK (that
  namespace's routing tables); every other family, AF_UNIX and AF_VSOCK included, fails with
  EAFNOSUPPORT. `socketpair(AF_UNIX)` still works: an unnamed pair reaches nothing.
- io_uring fails with ENOSYS (its requests could open sockets without `socket()`).
- a system call of another architecture (32-bit x86, x32) ends the process: the numbers
  above would not mean the same there.

Programs that serve or reach a Unix socket inside the sandbox (Python's multiprocessing
"forkserver", a test's own database socket) need `sandbox.network: true`.

The program is classic BPF, a dozen instructions written out here with `struct`: the maintained
libseccomp bindings are not on PyPI in a form that installs without the C library, and a
filter this small is easier to audit in full than a dependency.
"""

from __future__ import annotations

import errno
import functools
import os
import struct
from collections.abc import Sequence

_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_KILL = 0x80000000  # SECCOMP_RET_KILL_PROCESS
_ERRNO = 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (args[0]'s low word: little-endian)
_AF_UNIX, _AF_INET, _AF_INET6, _AF_NETLINK = 1, 2, 10, 16
_X32_BIT = 0x40000000

_ARCHES = {
    # machine: (AUDIT_ARCH_*, socket, socketpair, io_uring_setup/enter/register, has x32)
    "x86_64": (0xC000003E, 41, 53, (425, 426, 427), True),
    "aarch64": (0xC00000B7, 198, 199, (425, 426, 427), False),
}


def _program(machine: str) -> list[tuple[int, int, int, int]] | None:
    """The filter's instructions as (code, jump if true, jump if false, k), or None for an
    architecture this module does not know."""
    if machine not in _ARCHES:
        return None
    arch, socket, socketpair, uring, x32 = _ARCHES[machine]
    deny_family = _ERRNO | errno.EAFNOSUPPORT
    code: list[tuple[int, int, int, int]] = [
        (_LD_ABS, 0, 0, _ARCH),
        (_JEQ, 1, 0, arch),
        (_RET, 0, 0, _KILL),
        (_LD_ABS, 0, 0, _NR),
    ]
    if x32:
        code += [(_JGE, 0, 1, _X32_BIT), (_RET, 0, 0, _KILL)]
    checks = [*uring, socket, socketpair]
    # after the checks: [allow] [socket: ld, 3 x jeq, deny] [socketpair: ld, jeq, deny]
    for index, number in enumerate(checks):
        remaining = len(checks) - index - 1
        if number in uring:
            target = remaining + 1  # past the other checks and the allow: the ENOSYS below
        elif number == socket:
            target = remaining + 1 + 1  # past allow and ENOSYS: the socket block
        else:
            target = remaining + 1 + 1 + 5
        code.append((_JEQ, target, 0, number))
    code += [
        (_RET, 0, 0, _ALLOW),
        (_RET, 0, 0, _ERRNO | errno.ENOSYS),
        (_LD_ABS, 0, 0, _ARG0),
        (_JEQ, 6, 0, _AF_INET),  # to the last instruction: allow
        (_JEQ, 5, 0, _AF_INET6),
        (_JEQ, 4, 0, _AF_NETLINK),
        (_RET, 0, 0, deny_family),
        (_LD_ABS, 0, 0, _ARG0),
        (_JEQ, 1, 0, _AF_UNIX),
        (_RET, 0, 0, deny_family),
        (_RET, 0, 0, _ALLOW),
    ]
    return code


def network_filter(machine: str | None = None) -> bytes | None:
    """The compiled filter (`struct sock_filter[]`, as `bwrap --seccomp` reads it) for this
    machine, or None where there is none."""
    program = _program(machine or os.uname().machine)
    if program is None:
        return None
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)


@functools.cache
def _sealed(pid: int) -> int | None:
    """A sealed in-memory file holding the filter, made once per process (`pid` keys the
    cache, so a forked child makes its own)."""
    import fcntl

    program = network_filter()
    if program is None:
        return None
    fd = os.memfd_create("talaria-network-off", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.write(fd, program)
    seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
    return fd


def filter_path() -> str | None:
    """A path any process of this user can open to read the filter afresh (a sealed memfd of
    this process, so nothing on disk and nothing a command could change); None where this
    architecture has no filter."""
    pid = os.getpid()
    fd = _sealed(pid)
    return None if fd is None else f"/proc/{pid}/fd/{fd}"


_TRAMPOLINE = ["/bin/sh", "-c", 'exec "$@" 3<"$0"']


def with_filter(bwrap_argv: list[str], path: str) -> list[str]:
    """`bwrap_argv` started through /bin/sh, which opens the filter at `path` as descriptor 3
    for `--seccomp 3`: an argv that needs no descriptor passed along, so it also works in an
    editor's terminal (ACP) or for an MCP server. The shell runs a fixed script; the paths are
    its arguments."""
    return [*_TRAMPOLINE, path, *bwrap_argv]


def direct(prefix: Sequence[str]) -> tuple[list[str], int | None]:
    """For a process talaria starts itself: the `with_filter` argv without the shell step
    (one exec less per command), and the descriptor of the filter to pass to it (None when
    `prefix` has no filter). The caller closes the descriptor once the process has started."""
    if list(prefix[:3]) != _TRAMPOLINE:
        return list(prefix), None
    fd = os.open(prefix[3], os.O_RDONLY | os.O_CLOEXEC)
    argv = list(prefix[4:])
    at = argv.index("--seccomp") + 1
    argv[at] = str(fd)
    return argv, fd
