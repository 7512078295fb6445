"""Vision in: read_file on an image file (known by its bytes, whatever its name) gives a model
that sees the image as an image part of the next request, in all three wire formats, as MCP
images do; a model without vision reads the saved path; an image over the size cap and a file
that only pretends to be an image by its name are not sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers import MODES, images_sent, scripted_agent, tool_results
from talaria.messages.media import MAX_IMAGE_BYTES, media_dir
from talaria.testing import ScriptedProvider, call, text

pytestmark = pytest.mark.timeout(60)

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + bytes(range(64))
JPEG = b"\xff\xd8\xff\xe0" + b"\x00\x10JFIF" + bytes(range(64))


def read_images(
    home: Path, mode: str, paths: list[str], **config: object
) -> tuple[list[str], list[dict]]:
    script = [*(call("read_file", {"path": path}) for path in paths), text("seen")]
    with ScriptedProvider(script) as server:
        agent = scripted_agent(server, home, mode, tools=[], toolsets=["file"], config=config)
        result = agent.run_conversation("look at the pictures")
        assert server.invalid_requests == []
        return tool_results(result), [request.body for request in server.requests]


@pytest.mark.parametrize("mode", MODES)
def test_an_image_file_reaches_a_seeing_model_as_an_image_part(tmp_path: Path, mode: str) -> None:
    (tmp_path / "chart.png").write_bytes(PNG)
    (tmp_path / "photo.dat").write_bytes(JPEG)  # an image by its bytes, not its name
    results, bodies = read_images(tmp_path, mode, ["chart.png", "photo.dat"])
    assert results[0].startswith(f"{tmp_path / 'chart.png'} is a image/png image")
    assert results[1].startswith(f"{tmp_path / 'photo.dat'} is a image/jpeg image")
    assert images_sent(bodies[0]) == []
    assert images_sent(bodies[-1]) == [PNG, JPEG]
    assert "base64" not in json.dumps(results)  # the history keeps paths, not pixels


def test_a_model_without_vision_reads_the_saved_path(tmp_path: Path) -> None:
    (tmp_path / "chart.png").write_bytes(PNG)
    (result,), bodies = read_images(
        tmp_path, "chat_completions", ["chart.png"], **{"model.vision": False}
    )
    (saved,) = media_dir(tmp_path).iterdir()
    assert saved.read_bytes() == PNG and str(saved) in result
    assert images_sent(bodies[-1]) == []


def test_a_name_is_not_an_image_and_a_huge_image_is_not_sent(tmp_path: Path) -> None:
    (tmp_path / "fake.png").write_text("just text in a .png\n")
    (tmp_path / "huge.png").write_bytes(PNG + b"\x00" * MAX_IMAGE_BYTES)
    (fake, huge), bodies = read_images(tmp_path, "chat_completions", ["fake.png", "huge.png"])
    assert fake.startswith("1|just text in a .png")
    assert huge.startswith("Error:") and "too large" in huge
    assert images_sent(bodies[-1]) == []
