"""One page fetched by the rules of `web.*`: each hop of a redirect chain is checked again
(scheme, `web.deny`, `web.allow`, the address), and the request goes to the address that was
checked, with the name in the Host header and in TLS's SNI (certificates are verified against
the name).

Through a proxy the user configured (the standard `*_proxy` variables, `no_proxy` respected)
the name is still resolved and checked here, but the proxy connects: it is trusted to resolve
the same way.
"""

from __future__ import annotations

import codecs
import functools
import ssl
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit, urlunsplit

from talaria.tools.base import ToolError
from talaria.tools.web.addresses import Resolver, checked_addresses, system_resolve
from talaria.tools.web.settings import WebSettings

if TYPE_CHECKING:
    import httpx2

MAX_REDIRECTS = 5
USER_AGENT = "talaria/0.1 (web_fetch)"
ACCEPT = "text/html,application/pdf,text/*;q=0.9,*/*;q=0.5"
_REDIRECTS = {301, 302, 303, 307, 308}


@dataclass(frozen=True, slots=True)
class Page:
    url: str
    """Where the body came from, after redirects."""
    content_type: str
    body: bytes
    truncated: bool
    """The body was longer than `web.max_bytes`; only that much was read."""
    charset: str = "utf-8"


def target(url: str, settings: WebSettings) -> tuple[str, str, int]:
    """(scheme, host, port) of a URL that may be fetched by name, or a `ToolError` saying why
    not (a bad URL, a scheme other than http(s), a denied or, without asking, unknown domain)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise ToolError(f"invalid URL {url!r}: {exc}") from None
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if scheme not in ("http", "https") or not host:
        raise ToolError(f"invalid URL {url!r}: give an absolute http:// or https:// URL")
    if parts.username or parts.password:
        raise ToolError("URLs with a user name or password are not fetched")
    if settings.denied(host):
        raise ToolError(f"refused: {host} is denied by web.deny")
    return scheme, host, port or (443 if scheme == "https" else 80)


async def fetch_page(url: str, settings: WebSettings, resolve: Resolver = system_resolve) -> Page:
    """The page at `url`, following up to `MAX_REDIRECTS` redirects, each one checked."""
    import httpx2

    asked = target(url, settings)[1] if settings.ask_unknown else None
    for hop in range(MAX_REDIRECTS + 1):
        scheme, host, port = target(url, settings)
        if not settings.known(host) and host != asked:
            raise ToolError(_unknown(url, host, redirected=bool(hop)))
        addresses = await checked_addresses(
            host, port, allow_private=settings.private_ok(host), resolve=resolve
        )
        proxy = proxy_for(scheme, host)
        try:
            async with httpx2.AsyncClient(
                proxy=proxy, trust_env=False, timeout=settings.timeout, verify=_tls()
            ) as client:
                request = _request(client, url, host, addresses[0], proxy is not None)
                response = await client.send(request, stream=True)
                try:
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        url = urljoin(url, location)
                        continue
                    if response.status_code >= 400:
                        raise ToolError(f"HTTP {response.status_code} from {url}")
                    body, truncated = await _read_capped(response, settings.max_bytes)
                finally:
                    await response.aclose()
        except httpx2.HTTPError as exc:
            raise ToolError(f"cannot fetch {url}: {exc or type(exc).__name__}") from None
        content_type, charset = _content_type(response.headers.get("content-type", ""))
        return Page(url, content_type, body, truncated, charset)
    raise ToolError(f"too many redirects (more than {MAX_REDIRECTS}) from {url}")


def _unknown(url: str, host: str, *, redirected: bool) -> str:
    if redirected:
        return (
            f"refused: the page redirects to {url}, on {host}, a domain outside web.allow "
            "(fetch that URL itself to be asked about it)"
        )
    return f"refused: {host} is not in web.allow"


def _request(
    client: httpx2.AsyncClient, url: str, host: str, address: str, proxied: bool
) -> httpx2.Request:
    """A GET for `url`; direct, it goes to the checked `address` under the name `host`."""
    headers = {"User-Agent": USER_AGENT, "Accept": ACCEPT}
    if proxied:
        return client.build_request("GET", url, headers=headers)
    parts = urlsplit(url)
    ip_host = f"[{address}]" if ":" in address else address
    netloc = ip_host if parts.port is None else f"{ip_host}:{parts.port}"
    headers["Host"] = parts.netloc.rsplit("@", 1)[-1]
    return client.build_request(
        "GET",
        urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, "")),
        headers=headers,
        extensions={"sni_hostname": host.rstrip(".")},
    )


async def _read_capped(response: httpx2.Response, limit: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


def _content_type(header: str) -> tuple[str, str]:
    """(media type, charset) of a Content-Type header; a charset Python lacks is UTF-8."""
    media, _, params = header.partition(";")
    charset = "utf-8"
    for param in params.split(";"):
        name, _, value = param.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').lower() or charset
    try:
        codecs.lookup(charset)
    except LookupError:
        charset = "utf-8"
    return media.strip().lower(), charset


def proxy_for(scheme: str, host: str) -> str | None:
    """The proxy the user's environment names for this URL, None to connect directly."""
    proxies = urllib.request.getproxies()
    proxy = proxies.get(scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(host.rstrip(".")):
        return None
    return proxy


@functools.cache
def _tls() -> ssl.SSLContext:
    """One verified context for every fetch (loading the CA bundle is the slow part)."""
    return ssl.create_default_context()
