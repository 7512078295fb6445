"""Real turns on a real model server: llama.cpp's llama-server with Qwen2.5-Coder 0.5B Instruct
(scripts/model_server.sh), through the library and the CLI, in each wire API the server speaks
(Chat Completions, Responses, Anthropic Messages).

The model is small and answers with temperature 0 and a fixed seed, so the turns repeat; the
assertions still judge only what the tools did (the file on disk holds what the write_file
call sent, the read's result holds it), never the model's prose. Outputs and iterations are
capped so the whole file takes a few minutes on 2 cores. Each 0.5B turn asks for one tool step:
after a tool result the 0.5B model writes another call, never an answer (even when no tool is
offered), so the multi-step task (a read, a read that depends on it, the answer) runs on the
1.5B model, a second server. The read names line 1: asked only to read, the 0.5B sent
`offset: 0`, which read_file refused then.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from talaria import Agent
from talaria.events import ToolFinished, ToolStarted

pytestmark = [pytest.mark.model_server, pytest.mark.timeout(600)]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "model_server.sh"
SIZE = "0.5b"
LARGER = "1.5b"
"""For the multi-step task: after a tool result the 0.5B model writes another call, never an
answer, even when no tool is offered; the 1.5B answers."""
MODES = ("chat_completions", "codex_responses", "anthropic_messages")
MAX_TOKENS = 128
LIMITS = {"model.max_tokens": MAX_TOKENS, "approvals.mode": "off", "memory.enabled": False}
"""A short answer per call (a runaway generation ends soon), and no approval to wait for."""


@dataclass(frozen=True)
class ModelServer:
    url: str
    """The OpenAI base URL (ending in /v1)."""
    model: str

    def base_url(self, mode: str) -> str:
        """Anthropic clients add /v1 themselves."""
        return self.url.removesuffix("/v1") if mode == "anthropic_messages" else self.url


def _served_model(url: str) -> str:
    with urllib.request.urlopen(f"{url}/models", timeout=30) as answer:
        return str(json.load(answer)["data"][0]["id"])


def _unavailable(reason: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}: .ci/run starts one and sets its URL")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def model_server() -> Iterator[ModelServer]:
    """TALARIA_TEST_MODEL_URL when set (CI), else a server this run starts when the binary and
    the model are already built (`bash scripts/model_server.sh install`)."""
    yield from _serve("TALARIA_TEST_MODEL_URL", SIZE)


@pytest.fixture(scope="session")
def larger_model_server() -> Iterator[ModelServer]:
    """The 1.5B model, for the multi-step task: TALARIA_TEST_LARGER_MODEL_URL (CI), else a
    server this run starts (`bash scripts/model_server.sh install 1.5b`)."""
    yield from _serve("TALARIA_TEST_LARGER_MODEL_URL", LARGER)


def _serve(variable: str, size: str) -> Iterator[ModelServer]:
    url = os.environ.get(variable)
    if url:
        yield ModelServer(url, _served_model(url))
        return
    built = ROOT / ".ci" / "llama"
    if not (built / "bin" / "llama-server").exists() or not list(built.glob(f"models/*{size}*")):
        _unavailable(
            f"no {size} model server: set {variable} or build one with "
            f"`bash scripts/model_server.sh install {size}`"
        )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    where = tempfile.mkdtemp(prefix="talaria-test-llama-")
    started = subprocess.run(
        ["bash", str(SCRIPT), "start", size, str(port), where],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHON": sys.executable},
    )
    try:
        if started.returncode != 0:
            _unavailable(f"the model server did not start: {started.stderr[-500:]}")
        url = started.stdout.strip()
        yield ModelServer(url, _served_model(url))
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", where], timeout=60, check=False)


@dataclass
class Calls:
    """The tool calls of a turn as the tools saw them: arguments in, result out."""

    started: list[ToolStarted]
    finished: list[ToolFinished]

    def of(self, name: str) -> list[tuple[dict[str, Any], ToolFinished]]:
        results = {event.call_id: event for event in self.finished if event.name == name}
        return [
            (event.arguments, results[event.call_id])
            for event in self.started
            if event.name == name and event.call_id in results
        ]


def _agent(server: ModelServer, mode: str, tmp_path: Path, events: list[Any], **kw: Any) -> Agent:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return Agent(
        model=server.model,
        base_url=server.base_url(mode),
        api_mode=mode,
        home=tmp_path / "home",
        cwd=work,
        config=LIMITS,
        event_callback=events.append,
        **kw,
    )


def _calls(events: list[Any]) -> Calls:
    return Calls(
        [e for e in events if isinstance(e, ToolStarted)],
        [e for e in events if isinstance(e, ToolFinished)],
    )


def _written(calls: Calls, work: Path) -> tuple[Path, str]:
    """The file the last successful write_file call wrote, and the text it sent."""
    writes = [(args, done) for args, done in calls.of("write_file") if not done.is_error]
    assert writes, f"no write_file call succeeded: {calls.finished}"
    arguments = writes[-1][0]
    return work / str(arguments["path"]), str(arguments["content"])


def _read_back(calls: Calls, content: str) -> None:
    """A read_file call succeeded and its result holds `content` (what the model reads)."""
    reads = [done.result for _, done in calls.of("read_file") if not done.is_error]
    assert reads, f"no read_file call succeeded: {calls.finished}"
    assert content.strip(), "the write sent no text to read back"
    assert content.strip() in reads[-1], reads[-1]


WRITE = "Use write_file to write tangerine to note.txt."
READ = "Use read_file to read note.txt from line 1."


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_call_writes_a_file_through_the_library(
    model_server: ModelServer, mode: str, tmp_path: Path
) -> None:
    """One tool step and the answer (max_iterations=1 then asks for a summary)."""
    events: list[Any] = []
    agent = _agent(model_server, mode, tmp_path, events, toolsets=["file"], max_iterations=1)
    with agent:
        agent.run_conversation("Use the write_file tool to write the word tangerine to note.txt.")
    path, content = _written(_calls(events), agent.spec.cwd)
    assert path.read_text() == content


@pytest.mark.parametrize("mode", MODES)
def test_a_file_written_in_one_turn_is_read_back_in_the_next(
    model_server: ModelServer, mode: str, tmp_path: Path
) -> None:
    """The second turn reads what the first one wrote: the read's result (what the model is
    given) holds the text the write sent."""
    events: list[Any] = []
    agent = _agent(model_server, mode, tmp_path, events, toolsets=["file"], max_iterations=1)
    with agent:
        agent.run_conversation(WRITE)
        _, content = _written(_calls(events), agent.spec.cwd)
        events.clear()
        agent.run_conversation(READ)
    _read_back(_calls(events), content)


def _cli(server: ModelServer, mode: str, home: Path, work: Path, *argv: str) -> Calls:
    """`talaria -p ...` in `work` (it must exit 0): the tool calls of its stream-json events."""
    return _cli_turn(server, mode, home, work, *argv, "--max-turns", "1")[0]


def _cli_turn(
    server: ModelServer, mode: str, home: Path, work: Path, *argv: str
) -> tuple[Calls, dict[str, Any]]:
    """`talaria ...` in `work` (it must exit 0): the tool calls of its stream-json events and
    its result line."""
    ran = subprocess.run(
        [
            *(sys.executable, "-m", "talaria.cli.main", *argv, "--output-format", "stream-json"),
            *("--base-url", server.base_url(mode), "--model", server.model, "--api-mode", mode),
            *("--yolo", "--toolsets", "file"),
        ],
        cwd=work,
        env={**os.environ, "TALARIA_HOME": str(home), "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    lines = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    kinds = {"tool_started": ToolStarted, "tool_finished": ToolFinished}
    [result] = [line for line in lines if line.get("type") == "result"]
    events = [kinds[line.pop("type")](**line) for line in lines if line.get("type") in kinds]
    return _calls(events), result


def _cli_home(tmp_path: Path) -> tuple[Path, Path]:
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir(parents=True)
    home.mkdir()
    (home / "config.yaml").write_text(
        f"model:\n  max_tokens: {MAX_TOKENS}\nmemory:\n  enabled: false\n"
    )
    return home, work


@pytest.mark.parametrize("mode", MODES)
def test_the_cli_runs_a_tool_call(model_server: ModelServer, mode: str, tmp_path: Path) -> None:
    home, work = _cli_home(tmp_path)
    path, content = _written(_cli(model_server, mode, home, work, "-p", WRITE), work)
    assert path.read_text() == content


@pytest.mark.parametrize("mode", MODES)
def test_the_cli_reads_back_a_file_in_the_continued_session(
    model_server: ModelServer, mode: str, tmp_path: Path
) -> None:
    """`talaria -p` writes, `talaria -c -p` (the newest session of the folder) reads it."""
    home, work = _cli_home(tmp_path)
    _, content = _written(_cli(model_server, mode, home, work, "-p", WRITE), work)
    _read_back(_cli(model_server, mode, home, work, "-c", "-p", READ), content)


POINTER_TASK = (
    "pointer.txt holds the name of another file. Read pointer.txt, then read the file it "
    "names, and tell me what that file says."
)
SECRET = "The password is tangerine."


def _seed(work: Path) -> None:
    work.mkdir(parents=True, exist_ok=True)
    (work / "pointer.txt").write_text("secret.txt\n")
    (work / "secret.txt").write_text(f"{SECRET}\n")


def _followed_the_pointer(calls: Calls) -> None:
    """Two dependent steps: pointer.txt was read, then the file its result named (a name
    only that result gave), and that read's result holds the file's text."""
    reads = [(args, done) for args, done in calls.of("read_file") if not done.is_error]
    names = [Path(str(args["path"])).name for args, _ in reads]
    assert "pointer.txt" in names, calls.finished
    after = names.index("pointer.txt") + 1
    assert "secret.txt" in names[after:], calls.finished
    assert SECRET in reads[names.index("secret.txt", after)][1].result


@pytest.mark.parametrize("mode", MODES)
def test_a_multi_step_task_finishes_through_the_library(
    larger_model_server: ModelServer, mode: str, tmp_path: Path
) -> None:
    """One turn: read a file, read the file it names, answer (not stopped by the budget or
    the loop guard)."""
    events: list[Any] = []
    agent = _agent(larger_model_server, mode, tmp_path, events, toolsets=["file"], max_iterations=6)
    _seed(agent.spec.cwd)
    with agent:
        result = agent.run_conversation(POINTER_TASK)
    _followed_the_pointer(_calls(events))
    assert result["turn_exit_reason"] == "text_response", result["final_response"]
    assert result["completed"] and result["final_response"]


def test_the_cli_finishes_a_multi_step_task(
    larger_model_server: ModelServer, tmp_path: Path
) -> None:
    """`talaria -p` through the same steps, in one API mode: the library test above runs all
    three, and each 1.5B turn costs a minute or more on CI's two cores."""
    mode = "chat_completions"
    home, work = _cli_home(tmp_path)
    _seed(work)
    calls, result = _cli_turn(
        larger_model_server, mode, home, work, "-p", POINTER_TASK, "--max-turns", "6"
    )
    _followed_the_pointer(calls)
    assert result["turn_exit_reason"] == "text_response", result["final_response"]
