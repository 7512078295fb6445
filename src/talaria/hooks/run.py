"""Running one hook handler: a command gets the event as JSON on stdin, an HTTP endpoint gets
it as a POST body. Either answers with an exit code (HTTP: 0 for a 2xx answer), text and maybe
a JSON object; a handler that overstays its timeout is stopped (a command's whole process
group) and counts as no answer."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from talaria.hooks.settings import Handler

OUTPUT_LIMIT = 64 * 1024
"""Characters of a handler's output that are kept (the rest is cut)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """What one handler said."""

    code: int | None
    """The exit code (HTTP: 0 for 2xx, 1 otherwise); None when it timed out or did not start."""
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False

    @property
    def data(self) -> dict[str, Any] | None:
        """The JSON object it printed (exit 0 only), else None."""
        if self.code != 0 or not self.stdout.lstrip().startswith("{"):
            return None
        try:
            value = json.loads(self.stdout)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


def run_handler(handler: Handler, payload: dict[str, Any], cwd: Path) -> Answer:
    """Run `handler` on `payload` (blocking; call it off the event loop)."""
    body = json.dumps(payload, ensure_ascii=False, default=str)
    if handler.kind == "http":
        return _post(handler, body)
    return _command(handler, body, cwd)


def _command(handler: Handler, body: str, cwd: Path) -> Answer:
    shell = shutil.which("bash") or "/bin/sh"
    env = {**os.environ, "TALARIA_PROJECT_DIR": str(cwd), "CLAUDE_PROJECT_DIR": str(cwd)}
    try:
        process = subprocess.Popen(
            [shell, "-c", handler.target],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        return Answer(None, stderr=f"could not start: {exc.strerror}")
    try:
        out, err = process.communicate(body, timeout=handler.timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process)
        return Answer(None, timed_out=True)
    return Answer(process.returncode, out[:OUTPUT_LIMIT], err[:OUTPUT_LIMIT])


def _kill_group(process: subprocess.Popen[str]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        process.kill()
    with contextlib.suppress(subprocess.TimeoutExpired, ValueError, OSError):
        process.communicate(timeout=5)


def _post(handler: Handler, body: str) -> Answer:
    headers = {"Content-Type": "application/json"}
    for name, value in handler.headers.items():
        for var in handler.allowed_env:
            value = value.replace(f"${{{var}}}", os.environ.get(var, ""))
            value = value.replace(f"${var}", os.environ.get(var, ""))
        headers[name] = value
    request = urllib.request.Request(
        handler.target, data=body.encode("utf-8"), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=handler.timeout) as response:
            text = response.read(OUTPUT_LIMIT).decode("utf-8", errors="replace")
            return Answer(0, stdout=text)
    except urllib.error.HTTPError as exc:
        return Answer(1, stderr=f"HTTP {exc.code} {exc.reason}")
    except TimeoutError:
        return Answer(None, timed_out=True)
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            return Answer(None, timed_out=True)
        return Answer(None, stderr=f"could not reach it: {reason}")
