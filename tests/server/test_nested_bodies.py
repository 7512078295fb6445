"""A request body nested deeper than any real client sends is a 400 in the server's error
shape, whether the JSON parser itself runs out of recursion or the body parses; the server
keeps serving."""

from __future__ import annotations

from pathlib import Path

import pytest

from server_helpers import ServeProcess
from talaria.testing import ScriptedProvider

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("depth", [200, 100_000], ids=["parses", "beyond-the-parser"])
def test_a_deeply_nested_body_is_a_400(provider: ScriptedProvider, tmp_path: Path, depth: int):
    body = '{"input": ' + "[" * depth + "]" * depth + "}"
    with ServeProcess(provider, tmp_path / "home") as serve, serve.http() as http:
        answer = http.post("/v1/runs", content=body, headers={"content-type": "application/json"})
        assert answer.status_code == 400, answer.text
        assert "deeper than 100" in answer.json()["error"]["message"]
        assert http.get("/v1/sessions").status_code == 200
