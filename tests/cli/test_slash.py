"""The chat's slash commands, its approval/clarify prompts and its screen output, without a
terminal: commands run against a small host double backed by a real SQLite store, and the
renderer writes plain text into a buffer."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from talaria import events as ev
from talaria.cli.markdown_blocks import MarkdownBlocks
from talaria.cli.model_choice import ModelChoice, model_choices, pick, split_model_ref
from talaria.cli.prompts import QuestionBroker, parse_approval, parse_clarify
from talaria.cli.render import (
    Renderer,
    extract_diff,
    tidy,
    tool_preview,
    usage_footer,
)
from talaria.cli.slash import (
    build_registry,
    parse_command,
    split_last_exchange,
)
from talaria.config import Config
from talaria.events import ApprovalRequested, RequestWithdrawn
from talaria.policy.approval import ApprovalState
from talaria.store.sqlite import SQLiteSessionStore

REQUIRED = {
    "help",
    "new",
    "resume",
    "sessions",
    "title",
    "model",
    "compress",
    "usage",
    "tools",
    "yolo",
    "stop",
    "retry",
    "undo",
    "quit",
    "exit",
    "clear",
    "output",
}


def renderer(tmp_path: Path) -> tuple[Renderer, io.StringIO]:
    out = io.StringIO()
    return Renderer(out, color=False, cwd=tmp_path), out


class FakeAgent:
    def __init__(self, store: SQLiteSessionStore, messages: list[dict[str, Any]]) -> None:
        self.store = store
        self.session_id: str | None = None
        self.approvals = ApprovalState()
        self.messages = messages


class Host:
    """A CommandHost double that records what the commands asked for."""

    def __init__(self, tmp_path: Path, messages: list[dict[str, Any]] | None = None) -> None:
        self.store = SQLiteSessionStore(tmp_path / "state.db")
        self.agent = FakeAgent(self.store, messages or [])
        self.renderer, self.out = renderer(tmp_path)
        self.registry = build_registry()
        self.last_result: dict[str, Any] | None = None
        self.busy = False
        self.rewound: list[int] = []
        self.submitted: list[str] = []
        self.interrupted: list[str | None] = []
        self.switched: list[str | None] = []
        self.models: list[ModelChoice] = []
        self.config = Config.load(tmp_path / "home")
        self.cleared = 0
        self.quitting = False

    def history(self) -> list[dict[str, Any]]:
        return self.agent.messages

    def truncate(self, keep: int) -> None:
        self.rewound.append(keep)
        del self.agent.messages[keep:]

    def switch_session(self, session_id: str | None) -> None:
        self.switched.append(session_id)

    def switch_model(self, choice: ModelChoice) -> None:
        self.models.append(choice)

    def model_choices(self) -> list[ModelChoice]:
        start = {"model": "qwen0.5", "base_url": "http://127.0.0.1:8080/v1"}
        return model_choices(start, self.config)

    def current_model(self) -> ModelChoice:
        return self.models[-1] if self.models else self.model_choices()[0]

    def clear_screen(self) -> None:
        self.cleared += 1

    def model_label(self) -> str:
        return "custom:m"

    def tools(self) -> dict[str, Any]:
        return {}

    def compress(self, focus: str | None) -> tuple[int, int] | None:
        return None

    def submit(self, text: str) -> None:
        self.submitted.append(text)

    def interrupt(self, reason: str | None) -> None:
        self.interrupted.append(reason)

    def toggle_reasoning(self) -> bool:
        return True

    def quit(self) -> None:
        self.quitting = True

    def run(self, line: str) -> str:
        parsed = parse_command(line)
        assert parsed is not None, line
        command = self.registry.get(parsed[0])
        assert command is not None, line
        command.handler(self, parsed[1])  # type: ignore[arg-type]
        return self.out.getvalue()


EXCHANGE = [
    {"role": "user", "content": "first question"},
    {"role": "assistant", "content": "first answer"},
    {"role": "user", "content": "second question"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    {"role": "assistant", "content": "second answer"},
]


# ---- parsing ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/help", ("help", "")),
        ("  /resume   my pets  ", ("resume", "my pets")),
        ("/compress keep the API decisions", ("compress", "keep the API decisions")),
        ("/etc/hosts is broken, fix it", None),
        ("hello /help", None),
        ("/", None),
    ],
)
def test_a_line_is_a_command_only_when_it_starts_with_a_command_word(line, expected):
    assert parse_command(line) == expected


def test_the_registry_has_every_command_of_the_issue_and_help_lists_them_aligned():
    registry = build_registry()
    names = {command.name for command in registry.commands()}
    assert names >= REQUIRED
    lines = registry.help_text().splitlines()
    assert len(lines) == len(names)
    summary_columns = {
        line.index(command.summary)
        for line, command in zip(lines, registry.commands(), strict=True)
    }
    assert len(summary_columns) == 1
    assert all(len(line) <= 80 for line in lines)


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [
        ("hepl", "help"),
        ("resmue", "resume"),
        ("modle", "model"),
        ("quti", "quit"),
        ("zzzzzz", None),
    ],
)
def test_an_unknown_command_suggests_the_closest_one(typo, suggestion):
    assert build_registry().suggest(typo) == suggestion


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("anthropic:claude-sonnet-4", ("anthropic", "claude-sonnet-4")),
        ("openrouter:meta/llama-3:70b", ("openrouter", "meta/llama-3:70b")),
        ("qwen2:7b", (None, "qwen2:7b")),
        ("gpt-4.1", (None, "gpt-4.1")),
    ],
)
def test_model_refs_split_only_on_a_known_provider(ref, expected):
    assert split_model_ref(ref) == expected


def test_the_last_exchange_starts_at_the_last_user_message():
    keep, text = split_last_exchange(EXCHANGE)  # type: ignore[misc]
    assert text == "second question"
    assert keep == 2
    assert split_last_exchange([]) is None


# ---- commands ----------------------------------------------------------------------------


def test_undo_rewinds_to_before_the_last_exchange(tmp_path):
    host = Host(tmp_path, list(EXCHANGE))
    output = host.run("/undo")
    assert host.rewound == [2]
    assert "second question" in output
    host.run("/undo")
    assert host.rewound == [2, 0]
    assert "nothing to undo" in host.run("/undo")


def test_retry_resends_the_last_message_on_the_earlier_history(tmp_path):
    host = Host(tmp_path, list(EXCHANGE))
    host.run("/retry")
    assert host.rewound == [2]
    assert host.submitted == ["second question"]


def test_yolo_toggles_approvals_and_says_so(tmp_path):
    host = Host(tmp_path)
    assert "yolo on" in host.run("/yolo")
    assert host.agent.approvals.mode == "off"
    assert "yolo off" in host.run("/yolo")
    assert host.agent.approvals.mode == "manual"


def test_stop_interrupts_only_a_running_turn(tmp_path):
    host = Host(tmp_path)
    assert "nothing is running" in host.run("/stop")
    host.busy = True
    host.run("/stop")
    assert host.interrupted == ["/stop"]


def test_resume_resolves_titles_and_reports_unknown_ones(tmp_path):
    host = Host(tmp_path)
    host.store.create_session("20250101_000000_aaaaaa", title="pets")
    host.run("/resume pets")
    assert host.switched == ["20250101_000000_aaaaaa"]
    output = host.run("/resume nothing-like-it")
    assert host.switched == ["20250101_000000_aaaaaa"]
    assert "nothing-like-it" in output


def test_resume_without_an_argument_lists_sessions(tmp_path):
    host = Host(tmp_path)
    host.store.create_session("20250101_000000_aaaaaa", title="pets")
    output = host.run("/resume")
    assert "pets" in output and "20250101_000000_aaaaaa" in output
    assert host.switched == []


def test_title_renames_the_current_session(tmp_path):
    host = Host(tmp_path)
    assert "first message" in host.run("/title pets")
    host.store.create_session("s1")
    host.agent.session_id = "s1"
    host.run("/title pets")
    info = host.store.get_session("s1")
    assert info is not None and info.title == "pets"
    host.store.create_session("s2")
    host.agent.session_id = "s2"
    assert "pets" in host.run("/title pets")
    info = host.store.get_session("s2")
    assert info is not None and info.title is None


def test_model_switches_away_and_back_to_the_starting_endpoint(tmp_path):
    host = Host(tmp_path)
    host.run("/model anthropic:claude-x")
    assert (host.models[-1].provider, host.models[-1].model) == ("anthropic", "claude-x")
    assert host.models[-1].base_url is None
    for ref in ("custom:qwen0.5", "qwen0.5", "start", "1"):
        host.run(f"/model {ref}")
        assert host.models[-1].base_url == "http://127.0.0.1:8080/v1", ref
        assert host.models[-1].model == "qwen0.5"
    host.run("/model qwen2:7b")
    assert (host.models[-1].model, host.models[-1].base_url) == (
        "qwen2:7b",
        "http://127.0.0.1:8080/v1",
    )


def test_model_choices_cover_main_fallbacks_and_named_providers(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(
        "model: {default: gpt-4.1, provider: openai}\n"
        "fallback_providers: [{provider: anthropic, model: claude-sonnet-4-5}]\n"
        "providers: {box: {model: llama3, base_url: 'http://10.0.0.2:11434/v1'}}\n"
    )
    host = Host(tmp_path)
    listing = host.run("/model")
    for shown in (
        "start",
        "custom:qwen0.5",
        "main",
        "openai:gpt-4.1",
        "fallback 1",
        "anthropic:claude-sonnet-4-5",
        "box",
        "http://10.0.0.2:11434/v1",
    ):
        assert shown in listing, shown
    host.run("/model box")
    assert host.models[-1].base_url == "http://10.0.0.2:11434/v1"
    host.run("/model claude-sonnet-4-5")
    assert host.models[-1].provider == "anthropic"
    host.run("/model custom:qwen0.5")
    assert host.models[-1].base_url == "http://127.0.0.1:8080/v1"
    choices = host.model_choices()
    assert pick(choices, "2", choices[0]).name == "main"


def test_usage_shows_the_session_totals(tmp_path):
    host = Host(tmp_path)
    host.store.create_session("s1")
    host.store.update_session(
        "s1", usage={"input_tokens": 1500, "output_tokens": 20, "estimated_cost_usd": 0.25}
    )
    host.agent.session_id = "s1"
    output = host.run("/usage")
    assert "1.5k in · 20 out · cost $0.25" in output


def test_usage_shows_the_sessions_calls_by_model_as_talaria_usage_does(tmp_path):
    from talaria.store.base import UsageRecord

    host = Host(tmp_path)
    host.store.create_session("s1")
    host.store.create_session("other")
    spent = {"input_tokens": 1000, "output_tokens": 200, "cache_read_tokens": 3000,
             "estimated_cost_usd": 0.05}  # fmt: skip
    host.store.record_usage("s1", [UsageRecord("s1", "gpt-4.1", "openai", 2, spent)])
    host.store.record_usage("other", [UsageRecord("other", "m", "custom", 9, spent)])
    host.agent.session_id = "s1"
    lines = [line.split() for line in host.run("/usage").splitlines()]
    assert lines[1][:4] == ["MODEL", "CALLS", "INPUT", "OUTPUT"]
    assert lines[2] == ["openai:gpt-4.1", "2", "1,000", "200", "3,000", "0", "0", "4,200",
                        "75%", "$0.0500"]  # fmt: skip
    assert not any("custom:m" in line for line in lines)


def test_quit_asks_the_chat_to_leave(tmp_path):
    host = Host(tmp_path)
    host.run("/quit")
    assert host.quitting


# ---- approval and clarify prompts ----------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "decision"),
    [
        ("o", "once"),
        ("ONCE", "once"),
        ("y", "once"),
        ("s", "session"),
        ("always", "always"),
        ("d", "deny"),
        ("no", "deny"),
        ("", None),
        ("maybe", None),
    ],
)
def test_approval_answers(answer, decision):
    assert parse_approval(answer) == decision


def test_clarify_takes_a_choice_number_or_free_text():
    choices = ["red", "blue"]
    assert parse_clarify("2", choices) == "blue"
    assert parse_clarify("green please", choices) == "green please"
    assert parse_clarify("7", choices) == "7"
    assert parse_clarify("  ", choices) is None


def _approval(request_id: str = "req_1") -> ApprovalRequested:
    return ApprovalRequested(
        request_id=request_id,
        call_id="call_1",
        command="rm -rf build",
        reason="recursive delete",
        tool_name="terminal",
        arguments={},
        pattern="rm -rf build",
    )


def _broker() -> tuple[QuestionBroker, list[str], list[tuple[str, str]]]:
    shown: list[str] = []
    answered: list[tuple[str, str]] = []
    broker = QuestionBroker(
        show=lambda text, style: shown.append(text),
        wake=lambda: None,
        respond=lambda rid, answer: answered.append((rid, answer)) is None,
    )
    return broker, shown, answered


def test_an_approval_waits_for_a_valid_answer_from_the_prompt():
    broker, shown, answered = _broker()
    broker.on_event(_approval())
    assert "rm -rf build" in shown[0] and "recursive delete" in shown[0]
    assert broker.answer("perhaps") is None
    assert broker.answer("s") == "session"
    assert answered == [("req_1", "session")]
    assert broker.pending() is None


def test_parallel_requests_are_all_shown_and_answered_oldest_first():
    broker, shown, answered = _broker()
    broker.on_event(_approval("req_1"))
    broker.on_event(_approval("req_2"))
    assert len(shown) == 2 and "2 questions waiting" in shown[1]
    assert broker.answer("o") == "once"
    assert broker.answer("d") == "deny"
    assert answered == [("req_1", "once"), ("req_2", "deny")]


def test_a_withdrawn_request_leaves_the_prompt_and_the_next_line_is_not_its_answer():
    broker, shown, answered = _broker()
    broker.on_event(_approval())
    broker.on_event(RequestWithdrawn("req_1", "approval", "timeout"))
    assert broker.pending() is None
    assert "withdrawn" in shown[-1] and "in time" in shown[-1]
    assert broker.answer("y") is None
    assert answered == []


def test_a_cancelled_or_closed_approval_is_a_denial():
    broker, _, answered = _broker()
    broker.on_event(_approval("req_1"))
    broker.cancel()
    assert answered == [("req_1", "deny")]
    broker.close()
    broker.on_event(_approval("req_2"))
    assert answered[-1] == ("req_2", "deny") and broker.pending() is None


# ---- rendering -------------------------------------------------------------------------------


def test_streamed_markdown_is_cut_into_whole_blocks():
    blocks = MarkdownBlocks()
    out: list[str] = []
    stream = "Intro line\n\n```python\nx = 1\n\ny = 2\n```\n- a\n- b\n\nTail without newline"
    for index in range(0, len(stream), 3):
        out.extend(blocks.feed(stream[index : index + 3]))
    assert out == ["Intro line", "```python\nx = 1\n\ny = 2\n```", "- a\n- b"]
    assert blocks.rest() == "Tail without newline"


def test_usage_footer():
    usage = {
        "input_tokens": 200,
        "cache_read_tokens": 800,
        "output_tokens": 1234,
        "estimated_cost_usd": 0.0021,
    }
    assert (
        usage_footer(usage, 2, 3.44)
        == "1k in · 1.2k out · 80% cached · cost $0.0021 · 2 calls · 3.4s"
    )
    assert (
        usage_footer({"estimated_cost_usd": None}, 1, 0.5)
        == "0 in · 0 out · cost unknown · 1 call · 0.5s"
    )
    assert usage_footer({"estimated_cost_usd": 0.0}, 1, 0.5).endswith("cost $0.00 · 1 call · 0.5s")


def test_tool_previews_name_what_the_call_does():
    assert tool_preview("terminal", {"command": "ls -la"}) == "ls -la"
    assert tool_preview("search_files", {"pattern": "TODO", "path": "src"}) == "TODO src"
    assert tool_preview("todo", {"todos": [{}, {}]}) == "2 item(s)"
    assert tool_preview("mine", {"x": 1}) == '{"x": 1}'


def test_the_patch_diff_is_found_in_the_tool_result():
    result = "Patched a.py (1 replacement)\n--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y"
    assert extract_diff(result) == "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x\n+y"
    assert extract_diff("Wrote 3 lines") is None


def test_tidy_drops_surrounding_blank_lines_and_trailing_padding():
    assert tidy("\n   \nHello   \n  world  \n\n") == "Hello\n  world\n"


def _turn(render: Renderer, events: list[Any]) -> None:
    render.begin_turn()
    for event in events:
        render(event)


def test_a_turn_prints_text_tools_and_a_footer(tmp_path):
    render, out = renderer(tmp_path)
    (tmp_path / "f.txt").write_text("old line\n")
    _turn(
        render,
        [
            ev.ThinkingStarted(1),
            ev.ReasoningDelta("Checking the file.\n"),
            ev.TextDelta("Let me **look**.\n\n"),
            ev.ToolCallGenerated(0, "c1", "terminal"),
        ],
    )
    assert "preparing terminal" in render.status()
    render(ev.ToolStarted("c1", "terminal", {"command": "cat f.txt"}))
    assert "terminal cat f.txt" in render.status()
    render(ev.ToolFinished("c1", "terminal", "old line", False, 0.25))
    render(ev.ToolStarted("c2", "write_file", {"path": "f.txt", "content": "new line\n"}))
    (tmp_path / "f.txt").write_text("new line\n")
    render(ev.ToolFinished("c2", "write_file", "Wrote 1 line", False, 0.01))
    render(ev.ToolStarted("c3", "read_file", {"path": "missing.txt"}))
    render(ev.ToolFinished("c3", "read_file", "Error: no such file\nhint", True, 0.01))
    _finish(
        render,
        ev.ThinkingStarted(2),
        ev.TextDelta("All done."),
        ev.TurnFinished("text_response", "All done.", 2),
    )
    text = out.getvalue()
    assert "┊ Checking the file." in text
    assert "Let me look." in text
    assert "✓ terminal cat f.txt 0.2s" in text
    assert "-old line" in text and "+new line" in text
    assert "✗ read_file missing.txt" in text and "└ Error: no such file" in text
    assert text.rstrip().endswith("2 calls · 1.5s")
    assert text.index("Let me look.") < text.index("✓ terminal") < text.index("All done.")
    assert render.status() == ""


def _finish(render: Renderer, *events: Any) -> None:
    for event in events:
        render(event)
    render.end_turn({"usage": {}, "api_calls": 2, "turn_exit_reason": "text_response"}, 1.5)


def test_an_answer_that_was_not_streamed_is_printed_at_the_end(tmp_path):
    render, out = renderer(tmp_path)
    _turn(render, [ev.ThinkingStarted(1)])
    _finish(render, ev.TurnFinished("text_response", "Plain answer", 1))
    assert "Plain answer" in out.getvalue()


def test_hidden_reasoning_is_not_printed(tmp_path):
    render, out = renderer(tmp_path)
    render.show_reasoning = False
    _turn(render, [ev.ThinkingStarted(1), ev.ReasoningDelta("secret thoughts\n")])
    assert "reasoning" in render.status()
    _finish(render, ev.TextDelta("answer"), ev.TurnFinished("text_response", "answer", 1))
    assert "secret thoughts" not in out.getvalue()


def test_an_interrupted_turn_says_so(tmp_path):
    render, out = renderer(tmp_path)
    _turn(render, [ev.ThinkingStarted(1)])
    render.end_turn({"interrupted": True, "api_calls": 0, "turn_exit_reason": "interrupted"}, 1)
    assert out.getvalue().strip() == "⏹ interrupted"


def test_the_status_line_shows_the_newest_words_of_a_long_streaming_line(tmp_path):
    render, _ = renderer(tmp_path)
    _turn(render, [ev.ThinkingStarted(1), ev.TextDelta("word " * 40 + "NEWEST")])
    status = render.status()
    assert "writing… …" in status and "NEWEST" in status
    assert len(status) <= 80


def test_completion_offers_commands_then_session_titles():
    from prompt_toolkit.completion import CompleteEvent
    from prompt_toolkit.document import Document

    from talaria.cli.slash import SlashCompleter

    completer = SlashCompleter(
        build_registry(), lambda: [("pets", "20250101_a"), ("", "20250102_b")]
    )

    def complete(text: str) -> list[str]:
        return [c.text for c in completer.get_completions(Document(text), CompleteEvent())]

    assert complete("/re") == ["/resume", "/retry", "/rewind", "/reasoning"]
    assert complete("/resume p") == ["pets"]
    assert complete("/resume 2025") == ["20250101_a", "20250102_b"]
    assert complete("/title p") == []
    assert complete("hello /re") == []
