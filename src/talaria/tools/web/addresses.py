"""Which addresses a web tool may connect to, checked on the address itself.

A name is resolved once; every address it gives must be public (a name that answers with one
public and one loopback address is refused, since either could be the one connected to), and
the request then goes to that checked address, never to a second lookup of the name: a DNS
server that answers the check with a public address and the connection with 127.0.0.1 (DNS
rebinding) reaches nothing. Addresses that carry an IPv4 address inside an IPv6 one
(`::ffff:127.0.0.1`, 6to4, Teredo) are judged by the IPv4 address they carry.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable

from talaria.tools.base import ToolError

Resolver = Callable[[str, int], Awaitable[list[str]]]
"""(host, port) -> the addresses it resolves to."""

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


async def system_resolve(host: str, port: int) -> list[str]:
    """The addresses the system resolver gives for `host` (TCP only)."""
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise ToolError(f"cannot resolve {host!r}: {exc}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def is_public(address: IPAddress) -> bool:
    """Reachable on the public internet: not private, loopback, link-local, shared (CGNAT),
    multicast, reserved or unspecified."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or address.sixtofour or _teredo_client(address)
        if inner is not None:
            return is_public(inner)
    return address.is_global and not (address.is_multicast or address.is_reserved)


def _teredo_client(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    teredo = address.teredo
    return teredo[1] if teredo else None


async def checked_addresses(
    host: str, port: int, *, allow_private: bool, resolve: Resolver
) -> list[str]:
    """The addresses of `host`, all of them allowed; a `ToolError` naming the first one that
    is not (or the name, when it resolves to none)."""
    literal = _literal(host)
    addresses = [host.strip("[]")] if literal is not None else await resolve(host, port)
    if not addresses:
        raise ToolError(f"{host!r} resolves to no address")
    if not allow_private:
        for text in addresses:
            if not is_public(ipaddress.ip_address(text.split("%")[0])):
                raise ToolError(
                    f"refused: {host} is {text}, a private, loopback or link-local address "
                    "(web.allow_private: true, or a list naming this host, allows it)"
                )
    return addresses


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None
