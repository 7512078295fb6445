"""One tab: what it shows (an accessibility-tree snapshot with element refs), what it logged
(console messages, uncaught errors, failed requests) and the actions on it.

Refs are stable: an element keeps its ref (`e7`) for as long as it is in the page, in every
snapshot, because the ref is tied to the browser's id for that DOM node, never to its place
in the list. A ref from a page that was left is unknown, and says so.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from talaria.tools.base import ToolError
from talaria.tools.browser.cdp import CDPError, Connection

REFUSED = "refused by the web rules"
LOG_LINES = 200
"""Console and network lines kept per tab (the oldest go first)."""
NAVIGATION_NOTICE = 0.3
"""Seconds an action waits for a navigation that a page's script starts a moment after it
(one the click or key itself starts is already known when the input command answers)."""

_NAVIGATING = {"Page.frameRequestedNavigation", "Page.frameStartedLoading"}
"""A navigation of the page begins: a click's or a key's is requested while the input event
is handled, so it arrives before the input command's answer."""
_SKIPPED_ROLES = {"generic", "none", "presentation", "InlineTextBox", "LineBreak", "ignored"}
_TEXT_ROLES = {"StaticText", "text"}
_FIELD_ROLES = {"textbox", "searchbox", "combobox", "spinbutton"}
_SHOWN_PROPERTIES = ("checked", "selected", "expanded", "disabled", "required", "level")


class Tab:
    def __init__(
        self,
        connection: Connection,
        target_id: str,
        refs: Iterator[int],
        why_refused: Callable[[str], str | None],
    ) -> None:
        self.connection = connection
        self.why_refused = why_refused
        self.target_id = target_id
        self.session: str | None = None
        self.url = ""
        self.title = ""
        self._refs = refs
        self._by_node: dict[int, str] = {}
        self._nodes: dict[str, int] = {}
        self._labels: dict[str, str] = {}
        self.log: deque[str] = deque(maxlen=LOG_LINES)
        self.new_refusals: list[str] = []
        """Refused requests not yet reported with the page (`browser_*` results)."""
        self.unread = 0
        self._requests: dict[str, str] = {}
        self._started = asyncio.Event()
        self._loaded = asyncio.Event()

    async def attach(self) -> None:
        if self.session is not None:
            return
        attached = await self.connection.send(
            "Target.attachToTarget", {"targetId": self.target_id, "flatten": True}
        )
        self.session = str(attached["sessionId"])
        for domain in ("Page", "Runtime", "Network", "Log"):
            await self.send(f"{domain}.enable")

    async def send(
        self, method: str, params: dict[str, Any] | None = None, timeout: float = 30.0
    ) -> dict[str, Any]:
        return await self.connection.send(method, params, self.session, timeout)

    def on_event(self, method: str, params: dict[str, Any]) -> None:
        """Keep what the page logs, and notice navigations (for `settle`)."""
        if method in _NAVIGATING and params.get("frameId") == self.target_id:
            self._started.set()
        elif method == "Page.frameNavigated" and not params.get("frame", {}).get("parentId"):
            self._nodes.clear()  # a new document: the old page's refs are unknown from now
            self._by_node.clear()
        elif method == "Page.loadEventFired":
            self._loaded.set()
        elif method == "Runtime.consoleAPICalled":
            text = " ".join(_remote_text(arg) for arg in params.get("args", []))
            self._note(f"console.{params.get('type', 'log')}: {text}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            error = details.get("exception", {}).get("description") or details.get("text", "")
            self._note(f"uncaught error: {error}")
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            if entry.get("level") in ("error", "warning"):
                where = f" ({entry['url']})" if entry.get("url") else ""
                self._note(f"{entry.get('source', 'browser')} {entry['level']}: "
                           f"{entry.get('text', '')}{where}")  # fmt: skip
        elif method == "Network.requestWillBeSent":
            self._requests[params.get("requestId", "")] = params.get("request", {}).get("url", "")
            while len(self._requests) > 1000:
                self._requests.pop(next(iter(self._requests)))
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            url = self._requests.get(params.get("requestId", ""), "")
            self._failed(url, f"request failed: {url} ({params.get('errorText', 'failed')})")
        elif method == "Network.responseReceived":
            response = params.get("response", {})
            if int(response.get("status", 0)) >= 400:
                url = response.get("url", "")
                self._failed(url, f"HTTP {response['status']}: {url}")

    def _failed(self, url: str, line: str) -> None:
        reason = self.why_refused(url)
        if reason:
            line = f"{REFUSED}: {url}: {reason}"
            self.new_refusals = [*self.new_refusals[-9:], line]
        self._note(line)

    def note(self, line: str) -> None:
        self._note(line)

    def _note(self, line: str) -> None:
        self.log.append(line[:2000])
        self.unread = min(self.unread + 1, LOG_LINES)

    def read_log(self, everything: bool) -> list[str]:
        lines = list(self.log) if everything else list(self.log)[len(self.log) - self.unread :]
        self.unread = 0
        return lines

    async def navigate(self, url: str, timeout: float) -> None:
        self._started.clear()
        self._loaded.clear()
        result = await self.send("Page.navigate", {"url": url}, timeout)
        if result.get("errorText"):
            raise ToolError(f"cannot open {url}: {result['errorText']}")
        if result.get("loaderId"):
            await _wait(self._loaded, timeout)

    async def settle(self, timeout: float) -> None:
        """After an action: if it started a navigation, wait for the new page's load."""
        if await _wait(self._started, NAVIGATION_NOTICE):
            await _wait(self._loaded, timeout)

    def expect_navigation(self) -> None:
        self._started.clear()
        self._loaded.clear()

    async def location(self) -> tuple[str, str]:
        """(URL, title) of the page shown now."""
        found = await self.evaluate("[location.href, document.title]")
        if isinstance(found, list) and len(found) == 2:
            self.url, self.title = str(found[0]), str(found[1])
        return self.url, self.title

    async def evaluate(self, expression: str) -> Any:
        result = await self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}
        )
        if "exceptionDetails" in result:
            raise ToolError(f"the page failed: {result['exceptionDetails'].get('text', '')}")
        return result.get("result", {}).get("value")

    async def snapshot(self) -> str:
        """The page as an indented outline of roles, names and states, with a ref on every
        element an action can take."""
        tree = await self.send("Accessibility.getFullAXTree")
        nodes = {node["nodeId"]: node for node in tree.get("nodes", [])}
        roots = [node for node in nodes.values() if not node.get("parentId")]
        lines: list[str] = []
        for root in roots:
            self._render(root, nodes, 0, "", lines)
        return "\n".join(lines) or "(the page is empty)"

    def _render(
        self,
        node: dict[str, Any],
        nodes: dict[str, dict[str, Any]],
        depth: int,
        parent_name: str,
        lines: list[str],
    ) -> None:
        role = str(_value(node.get("role")) or "")
        name = " ".join(str(_value(node.get("name")) or "").split())
        children = [nodes[child] for child in node.get("childIds", []) if child in nodes]
        shown = not node.get("ignored") and not (role in _SKIPPED_ROLES and not name)
        if role in _TEXT_ROLES:
            if name and name != parent_name:
                lines.append(f"{'  ' * depth}- text: {name}")
            return
        if role == "RootWebArea":
            shown = False
        if shown:
            lines.append("  " * depth + self._line(node, role, name))
            depth += 1
        if role in _FIELD_ROLES:
            return  # a field's text is its value, already on its line
        for child in children:
            self._render(child, nodes, depth, name if shown else parent_name, lines)

    def _line(self, node: dict[str, Any], role: str, name: str) -> str:
        line = f"- {role}"
        if name:
            line += f' "{name[:200]}"'
        backend = node.get("backendDOMNodeId")
        if isinstance(backend, int):
            ref = self._by_node.get(backend)
            if ref is None:
                ref = f"e{next(self._refs)}"
                self._by_node[backend] = ref
                self._nodes[ref] = backend
            self._labels[ref] = f'{role} "{name[:60]}"' if name else role
            line += f" [ref={ref}]"
        value = _value(node.get("value"))
        if value not in (None, ""):
            line += f' value="{str(value)[:200]}"'
        for prop in node.get("properties", []):
            if prop.get("name") in _SHOWN_PROPERTIES:
                shown = _value(prop.get("value"))
                if shown not in (None, False, "false"):
                    line += f" {prop['name']}" + ("" if shown is True else f"={shown}")
        return line

    def node(self, ref: str) -> int:
        backend = self._nodes.get(ref.strip())
        if backend is None:
            raise ToolError(f"no element {ref!r} on this page: take a browser_snapshot for refs")
        return backend

    def label(self, ref: str) -> str:
        return self._labels.get(ref.strip(), ref)

    async def center(self, ref: str) -> tuple[float, float]:
        """Where to click an element: the middle of its first box, scrolled into view."""
        backend = self.node(ref)
        try:
            await self.send("DOM.scrollIntoViewIfNeeded", {"backendNodeId": backend})
            quads = (await self.send("DOM.getContentQuads", {"backendNodeId": backend}))["quads"]
        except CDPError as exc:
            raise ToolError(
                f"{ref} cannot be reached ({exc}): take a new browser_snapshot"
            ) from None
        if not quads:
            raise ToolError(f"{ref} ({self.label(ref)}) is not visible, so it cannot be clicked")
        xs, ys = quads[0][0::2], quads[0][1::2]
        return sum(xs) / len(xs), sum(ys) / len(ys)

    async def click(self, ref: str) -> None:
        x, y = await self.center(ref)
        self.expect_navigation()
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            await self.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
            )

    async def type(self, ref: str, text: str, *, clear: bool, submit: bool) -> None:
        backend = self.node(ref)
        try:
            await self.send("DOM.scrollIntoViewIfNeeded", {"backendNodeId": backend})
            await self.send("DOM.focus", {"backendNodeId": backend})
        except CDPError as exc:
            raise ToolError(f"{ref} ({self.label(ref)}) cannot take text: {exc}") from None
        if clear:
            handle = await self.send("DOM.resolveNode", {"backendNodeId": backend})
            await self.send(
                "Runtime.callFunctionOn",
                {"objectId": handle["object"]["objectId"], "functionDeclaration": _CLEAR},
            )
        if text:
            await self.send("Input.insertText", {"text": text})
        if submit:
            self.expect_navigation()
            for kind in ("keyDown", "keyUp"):
                await self.send(
                    "Input.dispatchKeyEvent",
                    {"type": kind, "key": "Enter", "code": "Enter",
                     "windowsVirtualKeyCode": 13, "text": "\r" if kind == "keyDown" else ""},
                )  # fmt: skip

    async def scroll(self, pages: float) -> str:
        where = await self.evaluate(
            f"window.scrollBy(0, {pages} * window.innerHeight);"
            "[Math.round(scrollY), document.documentElement.scrollHeight, innerHeight]"
        )
        top, height, view = (int(v) for v in where)
        return f"scrolled to {top}-{top + view} of {height} pixels"

    async def screenshot(self, full_page: bool) -> bytes:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            metrics = await self.send("Page.getLayoutMetrics")
            size = metrics.get("cssContentSize") or metrics.get("contentSize") or {}
            params["captureBeyondViewport"] = True
            params["clip"] = {"x": 0, "y": 0, "scale": 1,
                              "width": min(float(size.get("width", 1280)), 4000.0),
                              "height": min(float(size.get("height", 900)), 8000.0)}  # fmt: skip
        shot = await self.send("Page.captureScreenshot", params, timeout=60)
        return base64.b64decode(shot["data"])


_CLEAR = """function () {
  if (this.isContentEditable) { this.textContent = ""; }
  else if ("value" in this) { this.value = ""; }
  this.dispatchEvent(new Event("input", { bubbles: true }));
}"""


def new_refs() -> Iterator[int]:
    return itertools.count(1)


def _value(holder: Any) -> Any:
    return holder.get("value") if isinstance(holder, dict) else None


def _remote_text(arg: dict[str, Any]) -> str:
    if "value" in arg:
        return str(arg["value"])
    return str(arg.get("description") or arg.get("unserializableValue") or arg.get("type", ""))


async def _wait(event: asyncio.Event, timeout: float) -> bool:
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True
