"""An MCP server's image reaches a model that takes images as an image part (in each of the
three wire formats), and a model that takes none reads the saved file's path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import MODES, images_sent, scripted_agent, tool_results
from mcp_support import everything
from talaria.messages.media import media_dir, media_name, saved_marker, with_tool_images
from talaria.testing import ScriptedProvider, calls, text

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.npm
@pytest.mark.parametrize("mode", MODES)
def test_an_mcp_image_is_an_image_part_of_the_next_request(tmp_path: Path, mode: str) -> None:
    script = [calls(("mcp__everything__get-tiny-image", {})), text("a tiny picture"), text("ok")]
    with ScriptedProvider(script) as server:
        servers = {"everything": everything()}
        with scripted_agent(server, tmp_path, mode, mcp_servers=servers) as agent:
            result = agent.run_conversation("show me the image")
            agent.run_conversation("and now?")
        assert server.invalid_requests == []
        bodies = [request.body for request in server.requests]
    (saved,) = [p for p in media_dir(tmp_path).iterdir() if p.suffix == ".png"]
    assert str(saved) in tool_results(result)[0]  # the stored result keeps the path
    assert images_sent(bodies[0]) == []
    assert images_sent(bodies[1]) == [saved.read_bytes()]
    assert images_sent(bodies[2]) == [saved.read_bytes()]  # later turns still see it
    assert saved.read_bytes().startswith(PNG)
    stored = json.dumps(result["messages"])
    assert "base64" not in stored  # the history holds the path, not the pixels


@pytest.mark.npm
def test_a_model_without_images_reads_the_path(tmp_path: Path) -> None:
    script = [calls(("mcp__everything__get-tiny-image", {})), text("a file")]
    with ScriptedProvider(script) as server:
        servers = {"everything": everything()}
        config = {"model.vision": False}
        with scripted_agent(server, tmp_path, mcp_servers=servers, config=config) as agent:
            agent.run_conversation("show me the image")
        second = server.requests[1].body
    (saved,) = [p for p in media_dir(tmp_path).iterdir() if p.suffix == ".png"]
    assert images_sent(second) == []
    assert str(saved) in json.dumps(second)


def test_only_saved_images_of_this_home_are_sent(tmp_path: Path) -> None:
    folder = media_dir(tmp_path)
    folder.mkdir(parents=True)
    real = folder / media_name(PNG + b"real", ".png")
    real.write_bytes(PNG + b"real")
    renamed = folder / media_name(b"other bytes", ".png")
    renamed.write_bytes(PNG + b"changed after saving")
    outside = tmp_path / media_name(PNG + b"outside", ".png")
    outside.write_bytes(PNG + b"outside")
    markers = [saved_marker("image", "image/png", 9, path) for path in (real, renamed, outside)]
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "", "tool_calls": []},
        {"role": "tool", "tool_call_id": "a", "content": "\n".join(markers)},
        {"role": "tool", "tool_call_id": "b", "content": "no image here"},
        {"role": "assistant", "content": "seen"},
    ]
    shown = with_tool_images(history, folder)
    assert [m["role"] for m in shown] == ["user", "assistant", "tool", "tool", "user", "assistant"]
    assert images_sent({"messages": shown}) == [PNG + b"real"]
    assert with_tool_images(history[3:], folder) == history[3:]
