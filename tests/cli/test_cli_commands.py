"""`talaria sessions`, `talaria config`, `talaria doctor` and the first-run helpers, run through
the real entry point against a real SQLite store and a real scripted HTTP server."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from talaria.cli.first_run import (
    LocalServer,
    detect_local_servers,
    ensure_model,
    guidance,
    offer_local_server,
)
from talaria.cli.main import main
from talaria.config import Config
from talaria.store.sqlite import SQLiteSessionStore
from talaria.testing.server import ScriptedProvider

CONVERSATION = [
    {"role": "user", "content": "List the files"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "terminal", "arguments": '{"command": "ls"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "a.py\n```weird```"},
    {"role": "assistant", "content": "There is **a.py**."},
]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    with SQLiteSessionStore(tmp_path / "state.db") as store:
        store.create_session("20250101_120000_aaaaaa", model="m1", provider="custom", title="files")
        store.append_messages("20250101_120000_aaaaaa", list(enumerate(CONVERSATION)))
        store.create_session("20250102_120000_bbbbbb", model="m1")
        store.append_messages(
            "20250102_120000_bbbbbb", [(0, {"role": "user", "content": "Second session here"})]
        )
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ---- sessions ---------------------------------------------------------------------------


def test_sessions_list_shows_one_aligned_row_per_session(home, capsys):
    code, out, _ = run(capsys, "sessions", "list", "--home", str(home))
    assert code == 0
    header, *rows = out.splitlines()
    assert [row.split()[0] for row in rows] == ["20250102_120000_bbbbbb", "20250101_120000_aaaaaa"]
    assert "files" in rows[1] and "List the files" in rows[1]
    assert len({line.index("FIRST MESSAGE") for line in [header]}) == 1
    assert (
        rows[0].index("Second session")
        == rows[1].index("List the files")
        == header.index("FIRST MESSAGE")
    )


def test_sessions_show_prints_the_transcript(home, capsys):
    code, out, _ = run(capsys, "sessions", "show", "files", "--home", str(home))
    assert code == 0
    assert out.startswith("session 20250101_120000_aaaaaa  “files”")
    assert "List the files" in out and "There is **a.py**." in out
    assert "**Tool call** `terminal`" in out


def test_sessions_export_jsonl_round_trips_the_messages(home, capsys):
    code, out, _ = run(capsys, "sessions", "export", "20250101_120000", "--home", str(home))
    assert code == 0
    messages = [json.loads(line) for line in out.splitlines()]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"][0]["function"]["name"] == "terminal"
    assert messages[2]["content"] == "a.py\n```weird```"


def test_sessions_export_markdown_fences_tool_output_safely(home, capsys):
    code, out, _ = run(
        capsys, "sessions", "export", "files", "--format", "markdown", "--home", str(home)
    )
    assert code == 0
    assert out.startswith("# files\n")
    assert "## Tool result (`terminal`)\n\n````\na.py\n```weird```\n````" in out
    assert '```json\n{\n  "command": "ls"\n}\n```' in out


def test_sessions_rename_and_delete(home, capsys):
    code, out, _ = run(capsys, "sessions", "rename", "latest", "second", "--home", str(home))
    assert code == 0 and "second" in out
    code, out, err = run(capsys, "sessions", "rename", "second", "files", "--home", str(home))
    assert code == 2 and "files" in err
    with SQLiteSessionStore(home / "state.db") as store:
        deleted, kept = (s.id for s in store.list_sessions())  # newest first
    for session in (deleted, kept):
        (home / "checkpoints" / session).mkdir(parents=True)
    code, out, _ = run(capsys, "sessions", "delete", "second", "--home", str(home))
    assert code == 0
    with SQLiteSessionStore(home / "state.db") as store:
        assert [s.id for s in store.list_sessions()] == ["20250101_120000_aaaaaa"] == [kept]
    assert not (home / "checkpoints" / deleted).exists(), "its checkpoints go with it"
    assert (home / "checkpoints" / kept).exists()


def test_sessions_errors_are_one_line_and_exit_2(home, capsys):
    code, out, err = run(capsys, "sessions", "show", "no-such-thing", "--home", str(home))
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    code, _, err = run(capsys, "sessions", "show", "--home", str(home))
    assert code == 2 and "needs a session id" in err


# ---- config -----------------------------------------------------------------------------


def test_config_set_parses_values_and_keeps_the_file_valid(tmp_path, capsys):
    code, out, _ = run(capsys, "config", "set", "agent.max_turns", "12", "--home", str(tmp_path))
    assert code == 0 and out.startswith("agent.max_turns = 12")
    code, _, _ = run(capsys, "config", "set", "model.default", "gpt-4.1", "--home", str(tmp_path))
    assert Config.load(tmp_path).get("agent.max_turns") == 12
    code, _, err = run(capsys, "config", "set", "agent.max_turns", "lots", "--home", str(tmp_path))
    assert code == 2 and "max_turns" in err
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert saved == {"agent": {"max_turns": 12}, "model": {"default": "gpt-4.1"}}


def test_config_set_refuses_unknown_keys_with_a_suggestion(tmp_path, capsys):
    code, _, err = run(capsys, "config", "set", "modle.default", "x", "--home", str(tmp_path))
    assert code == 2 and "did you mean model.default" in err
    assert not (tmp_path / "config.yaml").exists()
    code, _, _ = run(
        capsys, "config", "set", "auxiliary.title.model", "small", "--home", str(tmp_path)
    )
    assert code == 0


def test_config_show_masks_keys_and_path_prints_the_file(tmp_path, capsys):
    run(capsys, "config", "set", "model.api_key", "sk-secret-123456789", "--home", str(tmp_path))
    code, out, _ = run(capsys, "config", "show", "--home", str(tmp_path))
    assert code == 0
    assert "sk-secret" not in out and "…6789" in out
    assert yaml.safe_load(out)["compression"]["threshold"] == 0.5
    code, out, _ = run(capsys, "config", "path", "--home", str(tmp_path))
    assert out.strip() == str(tmp_path / "config.yaml")


# ---- doctor -----------------------------------------------------------------------------


def test_doctor_reports_a_reachable_model_and_exits_0(tmp_path, capsys):
    with ScriptedProvider() as server:
        run(capsys, "config", "set", "model.default", "scripted-model", "--home", str(tmp_path))
        run(
            capsys,
            "config",
            "set",
            "model.base_url",
            server.openai_base_url,
            "--home",
            str(tmp_path),
        )
        code, out, _ = run(capsys, "doctor", "--home", str(tmp_path))
    assert code == 0
    lines = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip()}
    assert "✓ custom:scripted-model" in lines["model"]
    assert "✓" in lines["endpoint"] and "answers" in lines["endpoint"]


def test_doctor_says_what_is_missing_and_exits_2(tmp_path, capsys, monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "TALARIA_MODEL"):
        monkeypatch.delenv(name, raising=False)
    code, out, _ = run(capsys, "doctor", "--home", str(tmp_path))
    assert code == 2
    assert "✗ none configured" in out and "not ready" in out
    run(capsys, "config", "set", "model.default", "m", "--home", str(tmp_path))
    run(capsys, "config", "set", "model.base_url", "http://127.0.0.1:9/v1", "--home", str(tmp_path))
    code, out, _ = run(capsys, "doctor", "--home", str(tmp_path))
    assert code == 2 and "unreachable" in out


def test_doctor_shows_the_sandbox_in_force(tmp_path, capsys):
    from talaria.tools.sandbox_probe import sandbox_support

    code, out, _ = run(capsys, "doctor", "--home", str(tmp_path))
    line = next(line for line in out.splitlines() if line.split()[:1] == ["sandbox"])
    if sandbox_support().available:
        assert "✓ workspace-write" in line and "network off" in line
    else:
        assert "✗ workspace-write requested" in line and "approval policy alone" in line
    run(capsys, "config", "set", "sandbox.mode", "full-access", "--home", str(tmp_path))
    code, out, _ = run(capsys, "doctor", "--home", str(tmp_path))
    assert "full-access: commands run without a sandbox" in out
    code, _, err = run(capsys, "config", "set", "sandbox.mode", "open", "--home", str(tmp_path))
    assert code == 2 and 'sandbox.mode: found "open", expected read-only' in err


def test_the_sandbox_flag_sets_the_mode_for_the_agent():
    from talaria.cli.main import build_parser
    from talaria.cli.options import agent_kwargs

    args = build_parser().parse_args(["chat", "-q", "hi", "--sandbox", "read-only"])
    assert agent_kwargs(args)["config"]["sandbox.mode"] == "read-only"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["chat", "--sandbox", "everything"])


# ---- first run --------------------------------------------------------------------------


def test_local_servers_are_detected_in_parallel_with_their_models():
    with ScriptedProvider(model="local-llama") as server:
        port = int(server.url.rsplit(":", 1)[1])
        found = detect_local_servers([("Nothing", 9), ("Scripted", port)], timeout=0.3)
    assert [(s.name, s.base_url, s.models) for s in found] == [
        ("Scripted", f"http://127.0.0.1:{port}/v1", ["local-llama"])
    ]


def test_guidance_names_the_ways_to_configure_a_model():
    text = guidance("/home/u/.talaria/config.yaml", env={"ANTHROPIC_API_KEY": "x"})
    assert "OPENAI_API_KEY" in text and "--base-url" in text and "config set" in text
    assert "ANTHROPIC_API_KEY is set" in text
    assert len(text.splitlines()) <= 8 and max(len(line) for line in text.splitlines()) <= 80


def test_choosing_a_detected_server_saves_it_to_the_config(tmp_path):
    with ScriptedProvider(model="local-llama") as server:
        port = int(server.url.rsplit(":", 1)[1])
        base_url = server.openai_base_url
        args = argparse.Namespace(model=None, base_url=None, api_key=None)
        said: list[str] = []
        assert ensure_model(
            args,
            Config.load(tmp_path),
            ask=lambda _: "",
            say=said.append,
            detect=lambda: detect_local_servers([("Scripted", port)]),
        )
    assert args.model == "local-llama" and args.base_url == base_url
    saved = Config.load(tmp_path)
    assert saved.get("model.default") == "local-llama"
    assert saved.get("model.base_url") == base_url
    assert any("Scripted" in line for line in said)


def test_declining_the_offer_starts_nothing_and_saves_nothing(tmp_path):
    servers = [
        LocalServer("Ollama", "http://127.0.0.1:11434/v1", ["llama3"]),
        LocalServer("vLLM", "http://127.0.0.1:8000/v1", ["qwen"]),
    ]
    assert offer_local_server(servers, ask=lambda _: "", say=lambda _: None) is None
    assert offer_local_server(servers, ask=lambda _: "2", say=lambda _: None) == servers[1]
    args = argparse.Namespace(model=None, base_url=None, api_key=None)
    assert not ensure_model(
        args,
        Config.load(tmp_path),
        ask=lambda _: "n",
        say=lambda _: None,
        detect=lambda: servers[:1],
    )
    assert args.model is None and not (tmp_path / "config.yaml").exists()


def test_a_base_url_without_a_model_takes_the_first_listed_model(tmp_path):
    with ScriptedProvider(model="served-model") as server:
        args = argparse.Namespace(model=None, base_url=server.openai_base_url, api_key=None)
        assert ensure_model(args, Config.load(tmp_path), say=lambda _: None)
    assert args.model == "served-model"


def test_version_loads_none_of_the_heavy_libraries():
    code = (
        "import sys\nfrom talaria.cli.main import main\ntry:\n    main(['--version'])\n"
        "except SystemExit:\n    pass\n"
        "print(sorted(m for m in ('rich', 'prompt_toolkit', 'openai', 'anthropic', 'yaml')"
        " if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.splitlines() == ["talaria 0.1.0", "[]"]


@pytest.mark.parametrize("columns", ["50", "100", "240"])
def test_chat_help_wraps_to_the_terminal_as_argparse_would(
    columns: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import talaria.cli.main as cli_main

    monkeypatch.setenv("COLUMNS", columns)

    def shown() -> str:
        with pytest.raises(SystemExit):
            cli_main.build_parser("chat").parse_args(["chat", "--help"])
        return capsys.readouterr().out

    ours = shown()
    monkeypatch.setattr(cli_main, "_HelpFormatter", argparse.RawDescriptionHelpFormatter)
    assert ours == shown()
    assert "--output-format" in ours
