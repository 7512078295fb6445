"""`talaria serve` started as a user would (no key configured, loopback) against a hostile web
page: headless Chromium on a page from another loopback origin, a DNS-rebinding page (Chromium
maps `evil.example` to 127.0.0.1), a client sending its headers byte by byte, and more
connections than the server takes. Nothing they do may start a run, read a session or answer
an approval."""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from browser_support import chromium
from helpers import serving
from server_helpers import ServeProcess, read_events
from talaria.testing import ScriptedProvider, call, text

pytestmark = pytest.mark.timeout(180)

ATTACK = """
<!doctype html><title>hostile</title><script>
const target = %(target)s;
const body = JSON.stringify({input: "delete everything"});
window.results = {};
async function attempt(name, run) {
  try { window.results[name] = await run(); }
  catch (error) { window.results[name] = "blocked: " + error.name; }
}
(async function () {
  await attempt("text_plain_post", () => fetch(target + "/v1/runs", {
    method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body: body,
  }).then(r => r.type));
  await attempt("beacon", () => navigator.sendBeacon(target + "/v1/runs", body));
  await attempt("json_post_with_credentials", () => fetch(target + "/v1/runs", {
    method: "POST", credentials: "include", headers: {"Content-Type": "application/json"},
    body: body,
  }).then(r => r.status));
  await attempt("read_sessions_with_credentials", () =>
    fetch(target + "/v1/sessions", {credentials: "include"}).then(r => r.text()));
  const form = document.createElement("form");
  form.method = "POST"; form.action = target + "/v1/runs"; form.enctype = "text/plain";
  form.target = "sink";
  const field = document.createElement("input");
  field.name = '{"input": "delete everything", "x": "'; field.value = '"}';
  form.appendChild(field);
  const sink = document.createElement("iframe"); sink.name = "sink";
  document.body.appendChild(sink); document.body.appendChild(form);
  sink.onload = () => { window.done = true; };
  form.submit();
})();
</script>
"""


class _HostilePage(BaseHTTPRequestHandler):
    page = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(self.page)))
        self.end_headers()
        self.wfile.write(self.page)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def _hostile_site(target: str) -> Iterator[str]:
    """A second little web server, on another loopback port: another origin."""
    page = (ATTACK % {"target": json.dumps(target)}).encode()
    handler = type("Handler", (_HostilePage,), {"page": page})
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), handler)) as site:
        yield f"http://127.0.0.1:{site.server_address[1]}"


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ScriptedProvider, ServeProcess]]:
    """One server for the module, started the default way: no key configured."""
    home = tmp_path_factory.mktemp("serve-home")
    (home / "config.yaml").write_text(
        "context:\n  engine: none\nmemory:\n  enabled: false\nserver:\n  header_timeout: 1\n"
        "  allowed_hosts: [talaria.lan]\n  allowed_origins: ['http://tools.example:3000']\n"
    )
    with ScriptedProvider() as provider, ServeProcess(provider, home, key=None) as serve:
        yield provider, serve


@pytest.fixture
def serve(served: tuple[ScriptedProvider, ServeProcess]) -> ServeProcess:
    return served[1]


@pytest.fixture
def model(served: tuple[ScriptedProvider, ServeProcess]) -> ScriptedProvider:
    return served[0]


def _sessions(serve: ServeProcess) -> list[dict[str, Any]]:
    with serve.http() as http:
        return list(http.get("/v1/sessions").json()["data"])


def test_a_page_on_another_origin_cannot_start_a_run_or_read_sessions(
    serve: ServeProcess, model: ScriptedProvider
) -> None:
    served_before, sessions_before = len(model.requests), _sessions(serve)
    statuses: list[tuple[str, int]] = []
    with chromium() as browser:
        page = browser.new_page()
        page.on(
            "response",
            lambda r: (
                statuses.append((r.request.method, r.status))
                if r.url.startswith(serve.url)
                else None
            ),
        )
        with _hostile_site(serve.url) as site:
            page.goto(site)
            page.wait_for_function("() => window.done === true", timeout=30_000)
            results = page.evaluate("() => window.results")
    assert results["text_plain_post"] == "opaque"  # sent: the browser asks no one first
    assert results["json_post_with_credentials"].startswith("blocked")  # CORS preflight
    assert results["read_sessions_with_credentials"].startswith("blocked")
    posts = [status for method, status in statuses if method == "POST"]
    assert posts and all(status in (401, 403, 415) for status in posts), statuses
    assert len(model.requests) == served_before, "no run reached the model"
    assert _sessions(serve) == sessions_before


def test_the_origin_and_content_type_rules_hold_even_with_the_key(serve: ServeProcess) -> None:
    """The key is the first wall; these are the second, tried with the key in hand."""
    body = json.dumps({"input": "hi"})
    with serve.http() as http:
        foreign = http.post(
            "/v1/runs",
            content=body,
            headers={"content-type": "application/json", "origin": "http://127.0.0.1:1"},
        )
        plain = http.post("/v1/runs", content=body, headers={"content-type": "text/plain"})
        null_origin = http.delete("/v1/sessions/x", headers={"origin": "null"})
    assert (
        foreign.status_code == 403
        and "server.allowed_origins" in foreign.json()["error"]["message"]
    )
    assert plain.status_code == 415
    assert null_origin.status_code == 403


def test_configured_hosts_and_origins_are_let_in(serve: ServeProcess) -> None:
    port = urlsplit(serve.url).port
    with serve.http() as http:
        named = http.get("/v1/sessions", headers={"host": f"talaria.lan:{port}"})
        other = http.get("/v1/sessions", headers={"host": f"evil.example:{port}"})
        allowed = http.patch(
            "/v1/sessions/no-such-session",
            json={"title": "x"},
            headers={"origin": "http://tools.example:3000"},
        )
    assert named.status_code == 200
    assert other.status_code == 421 and "server.allowed_hosts" in other.json()["error"]["message"]
    assert allowed.status_code == 404  # past the origin rule, to the route


def test_dns_rebinding_is_refused_before_sessions_are_read_or_approvals_answered(
    serve: ServeProcess, model: ScriptedProvider
) -> None:
    canary = serve.home / "escaped"
    model.add(
        call("terminal", {"command": f"touch {canary}", "escalate": True, "justification": "x"}),
        text("done"),
    )
    with serve.http() as http:
        run = http.post("/v1/runs", json={"input": "make the file"}).json()
        with httpx.stream(
            "GET", f"{serve.url}{run['events_url']}", headers=serve.headers, timeout=60
        ) as stream:
            asked = next(e for e in read_events(stream) if e.name == "approval.requested")
    port = urlsplit(serve.url).port
    evil = f"http://evil.example:{port}"
    attack = """async ([key, run, request]) => {
      const auth = {Authorization: "Bearer " + key, "Content-Type": "application/json"};
      const sessions = await fetch("/v1/sessions", {headers: auth});
      const approve = await fetch(`/v1/runs/${run}/approvals/${request}`,
        {method: "POST", headers: auth, body: JSON.stringify({decision: "once"})});
      return [sessions.status, await sessions.text(), approve.status];
    }"""
    with chromium("--host-resolver-rules=MAP evil.example 127.0.0.1") as browser:
        page = browser.new_page()
        landing = page.goto(evil + "/")  # the page's origin is now evil.example:<port>
        assert landing is not None and landing.status == 421
        # The worst case: the rebinding page even knows the key.
        sessions_status, sessions_text, approve_status = page.evaluate(
            attack, [serve.key, run["run_id"], asked.data["request_id"]]
        )
    assert (sessions_status, approve_status) == (421, 421)
    assert run["session_id"] not in sessions_text
    with serve.http() as http:
        assert http.get(f"/v1/runs/{run['run_id']}").json()["status"] == "running"
        denied = http.post(
            f"/v1/runs/{run['run_id']}/approvals/{asked.data['request_id']}",
            json={"decision": "deny"},
        )
        assert denied.status_code == 200
    assert not canary.exists()


def _closed(sock: socket.socket) -> bool:
    """True once the server has closed (or reset) the connection."""
    readable, _, _ = select.select([sock], [], [], 0)
    if not readable:
        return False
    try:
        return sock.recv(1) == b""
    except ConnectionError:
        return True


def test_a_client_sending_headers_byte_by_byte_is_dropped(serve: ServeProcess) -> None:
    port = urlsplit(serve.url).port
    head = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 4000 + b"\r\n\r\n"
    sent = 0
    with socket.create_connection(("127.0.0.1", port)) as sock:
        try:
            while sent < len(head) and not _closed(sock):
                sock.send(head[sent : sent + 1])
                sent += 1
                time.sleep(0.01)
        except ConnectionError:
            pass
        dropped = _closed(sock) or sent < len(head)
    assert dropped and sent < len(head), "the server waited for the whole slow head"
    assert httpx.get(serve.url + "/health").status_code == 200


def test_connections_past_the_cap_get_503_until_some_close(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(
        "context:\n  engine: none\nmemory:\n  enabled: false\n"
        "server:\n  max_connections: 4\n  header_timeout: 120\n"
    )
    with ServeProcess(provider, home) as serve:
        address = ("127.0.0.1", urlsplit(serve.url).port)
        idle = [socket.create_connection(address) for _ in range(4)]
        try:
            _wait_for_status(serve, 503)
        finally:
            for sock in idle:
                sock.close()
        _wait_for_status(serve, 200)


def _wait_for_status(serve: ServeProcess, status: int) -> None:
    seen: list[int] = []
    for _ in range(200):
        with httpx.Client(timeout=10) as fresh:  # a new connection each time
            seen.append(fresh.get(serve.url + "/health").status_code)
        if seen[-1] == status:
            return
        time.sleep(0.05)
    raise AssertionError(f"never answered {status}: {sorted(set(seen))}")
