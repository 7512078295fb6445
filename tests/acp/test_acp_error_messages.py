"""An ACP request that fails for a reason talaria did not foresee answers with that reason as
the error's message (what editors show), not the SDK's bare "Internal error" with the reason
tucked into `data.details`."""

from __future__ import annotations

from pathlib import Path

import acp
import pytest
import yaml
from acp.schema import TextContentBlock

from acp_editor import Editor, connected
from talaria.testing import ScriptedProvider

pytestmark = pytest.mark.timeout(120)


async def test_a_store_that_cannot_open_is_the_errors_message(
    provider: ScriptedProvider, tmp_path: Path
) -> None:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    config = {"context": {"engine": "none"}, "store": {"url": "mysql://db.example/sessions"}}
    (home / "config.yaml").write_text(yaml.safe_dump(config))
    async with connected(Editor(), provider, home) as conn:
        with pytest.raises(acp.RequestError) as failed:
            session = await conn.new_session(cwd=str(work), mcp_servers=[])
            await conn.prompt(
                session_id=session.session_id, prompt=[TextContentBlock(type="text", text="hi")]
            )
    assert str(failed.value).startswith("talaria: store.url 'mysql://db.example/sessions' is not")
    assert failed.value.data["type"] == "StoreError"
    assert provider.requests == []
