"""schemathesis against the served OpenAPI description: generated requests to every operation
never get a server error (5xx), and the description covers every route the app serves."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from server_helpers import KEY, ServeProcess
from talaria.server.app import create_app
from talaria.server.settings import ServerSettings
from talaria.testing import Script, ScriptedProvider, text

pytestmark = pytest.mark.timeout(300)


def test_every_served_route_is_described() -> None:
    app = create_app(ServerSettings(), make_agent=lambda session_id: None, store=None)  # type: ignore[arg-type, return-value]
    served = {
        (route.path, method.lower()) for route in app.routes for method in route.methods or ()
    }
    served -= {(path, "head") for path, _ in served}
    from talaria.server.openapi import openapi_document

    described = {
        (path, method) for path, ops in openapi_document()["paths"].items() for method in ops
    }
    assert served == described


def test_schemathesis_finds_no_server_error(tmp_path: Path) -> None:
    command = shutil.which("schemathesis") or str(Path(sys.executable).parent / "schemathesis")
    provider = ScriptedProvider(script=Script(fallback=lambda body: text("ok")))
    with provider, ServeProcess(provider, tmp_path / "home") as serve:
        schema = httpx.get(f"{serve.url}/openapi.json", headers=serve.headers).json()
        assert schema["openapi"].startswith("3.1")
        done = subprocess.run(
            [
                command, "run", f"{serve.url}/openapi.json",
                "--checks", "not_a_server_error",
                "--header", f"Authorization: Bearer {KEY}",
                "--max-examples", "4", "--seed", "7", "--no-shrink", "--phases", "coverage,fuzzing",
                "--max-time", "50", "--request-timeout", "30", "--workers", "1",
            ],
            capture_output=True, text=True, timeout=240, cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
