"""Secrets out of reach, not just out of sight: a fake HOME full of canary credentials, read
through the terminal in every spelling the issue tried, searched with both search engines, and
carried out reversed or base64-encoded; and the environment commands inherit."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from boundary_helpers import make_agent, need_sandbox, turn, world_fixture  # noqa: F401

from talaria.messages.redact import redact
from talaria.server.settings import ServerSettings
from talaria.testing import ScriptedProvider, calls, text
from talaria.tools.builtin import files

need_sandbox()

SECRETS = {
    ".ssh/id_ed25519": "CANARY-ssh-key-4411",
    ".ssh/deploy": "CANARY-ssh-deploy-4412",
    ".aws/credentials": "CANARY-aws-4413",
    ".config/gcloud/application_default_credentials.json": "CANARY-gcloud-4414",
    ".gnupg/private-keys-v1.d/a.key": "CANARY-gnupg-4415",
    ".netrc": "CANARY-netrc-4416",
    ".vault-token": "CANARY-vault-4417",
}
OWN = {"config.yaml": "CANARY-talaria-config-4418", "state.db": "CANARY-talaria-db-4419"}
EXTRA = "CANARY-configured-4420"
PUBLIC = "PUBLIC-ssh-key-4421"


@pytest.fixture
def canaries(world: dict[str, Path]) -> list[str]:
    """Every secret file holds its canary; one extra file is hidden by configuration."""
    for relative, canary in SECRETS.items():
        path = world["user"] / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{canary}\n")
    (world["th"] / "config.yaml").write_text(f"note: {OWN['config.yaml']}\n")
    with sqlite3.connect(world["th"] / "state.db") as database:
        database.execute("CREATE TABLE canary (value TEXT)")
        database.execute("INSERT INTO canary VALUES (?)", (OWN["state.db"],))
    (world["outside"] / "vault.txt").write_text(f"{EXTRA}\n")
    (world["user"] / ".ssh" / "id_ed25519.pub").write_text(f"{PUBLIC}\n")
    return [*SECRETS.values(), *OWN.values(), EXTRA]


def _agent(server: ScriptedProvider, world: dict[str, Path], **kw: Any) -> Any:
    config = {"sandbox.hidden_paths": [str(world["outside"] / "vault.txt")]}
    return make_agent(server, world, approvals="off", config=config, **kw)


def test_no_reader_spelling_gets_a_secret_out_of_the_sandbox(
    provider: ScriptedProvider, world: dict[str, Path], canaries: list[str]
) -> None:
    user, th, vault = world["user"], world["th"], world["outside"] / "vault.txt"
    readers = [
        f"dd if={user}/.ssh/id_ed25519 status=none",
        f"rev {user}/.ssh/deploy {user}/.netrc {user}/.vault-token",
        f"find {user} -type f -exec cat {{}} +",
        f"tar -cf - -C {user} . | tar -xOf -",
        f"iconv -f utf-8 -t utf-8 {user}/.aws/credentials",
        f"cat {th}/config.yaml {th}/state.db {vault}",
        f"xargs cat < /dev/null; cat {user}/.config/gcloud/* {user}/.gnupg/*/*",
    ]
    results = turn(
        provider, _agent(provider, world), *(("terminal", {"command": r}) for r in readers)
    )
    together = "\n".join(results)
    for canary in canaries:
        assert canary not in together and canary[::-1] not in together, canary
    assert PUBLIC in results[2], "the readers work: the public key is there to read"


@pytest.mark.parametrize("ripgrep", [True, False])
def test_search_files_never_opens_a_secret_and_redacts_every_line(
    provider: ScriptedProvider,
    world: dict[str, Path],
    canaries: list[str],
    monkeypatch: pytest.MonkeyPatch,
    ripgrep: bool,
) -> None:
    if not ripgrep:
        monkeypatch.setattr(files, "ripgrep", lambda: None)
    elif files.ripgrep() is None:
        pytest.skip("ripgrep is not installed here (.ci/run installs it)")
    user = world["user"]
    (user / "keys").mkdir()
    (user / "keys" / "server.pem").write_text(
        "-----BEGIN OPENSSH PRIVATE KEY-----\nCANARY-pem-4422\n-----END OPENSSH PRIVATE KEY-----\n"
    )
    (user / "notes.txt").write_text("DB_API_KEY=hunter2hunter2hunter2 CANARY-visible\n")
    searches = [
        {"pattern": "CANARY", "path": str(user)},
        {"pattern": "CANARY", "path": str(user / ".aws")},
        {"pattern": "CANARY", "path": str(user / ".ssh")},
        {"pattern": "CANARY", "path": str(world["th"])},
        {"pattern": "CANARY", "path": str(user / "keys")},
    ]
    agent = _agent(provider, world, cwd=user)
    results = turn(provider, agent, *(("search_files", search) for search in searches))
    together = "\n".join(results)
    for canary in [*canaries, "CANARY-pem-4422"]:
        assert canary not in together, canary
    assert "notes.txt:1:DB_API_KEY=[REDACTED:secret]" in results[0]
    assert "hunter2hunter2" not in together


def test_reversed_and_base64_forms_of_the_agents_key_are_redacted(
    provider: ScriptedProvider, world: dict[str, Path]
) -> None:
    key = "zq-own-key-7f3a9c2e41b8d6-0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e7f"
    (world["work"] / "leak.txt").write_text(f"token: {key}\n")
    commands = [
        "rev leak.txt",
        "base64 leak.txt",
        "base64 -w0 leak.txt | rev",
        "rev leak.txt | base64",
        "tail -c +8 leak.txt | base64 -w0",
    ]
    agent = make_agent(provider, world, approvals="off", api_key=key)
    with agent:
        for command in commands:
            provider.add(calls(("terminal", {"command": command})))
        provider.add(text("done"))
        result = agent.run_conversation(user_message="go")
        stored = json.dumps(agent.store.load_messages(result["session_id"]))
    sent = json.dumps([request.body for request in provider.requests])
    leaked = base64.b64encode(key.encode()).decode()
    for blob in (sent, stored):
        assert key not in blob and key[::-1] not in blob
        assert leaked[4:40] not in blob and leaked[::-1][8:40] not in blob
    assert blob.count("[REDACTED:configured-key]") >= len(commands)


def test_the_server_key_is_redacted_however_it_is_encoded() -> None:
    key = "srv-key-5c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f"
    ServerSettings(api_key=key).ensure_key()
    encoded = base64.b64encode(f"Authorization: {key}".encode()).decode()
    for form in (key, key[::-1], encoded):
        assert "[REDACTED:server-key]" in redact(f"out: {form}"), form


def test_commands_get_an_allowlisted_environment_through_the_agent(
    provider: ScriptedProvider, world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    names = ["GROQ_API_KEY", "DEEPSEEK_API_KEY", "TALARIA_SERVER_KEY", "AWS_SECRET_ACCESS_KEY"]
    for name in names:
        monkeypatch.setenv(name, f"value-of-{name.lower()}")
    monkeypatch.setenv("LANG", "C.UTF-8")
    agent = make_agent(provider, world, approvals="off")
    (result,) = turn(provider, agent, ("terminal", {"command": "env"}))
    for name in names:
        assert name not in result and f"value-of-{name.lower()}" not in result
    assert "LANG=C.UTF-8" in result and "HOME=" in result and "PATH=" in result
    monkeypatch.setenv("TALARIA_TOOL_ENV_PASSTHROUGH", "GROQ_API_KEY")
    (passed,) = turn(
        provider, make_agent(provider, world, approvals="off"), ("terminal", {"command": "env"})
    )
    assert "GROQ_API_KEY=" in passed
