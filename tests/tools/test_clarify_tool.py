"""The clarify tool: a question to the user, through whatever callback the session has."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from talaria.tools.base import ToolContext, ToolError
from talaria.tools.builtin import builtin_tools
from talaria.tools.builtin.clarify import clarify


def _ctx(answerer: Callable[[str, list[str] | None], Awaitable[str | None]] | None) -> ToolContext:
    return ToolContext(
        task_id="task-1",
        session_id="session-1",
        cwd=Path("."),
        home=Path(".talaria"),
        interrupt=threading.Event(),
        emit=lambda event: None,
        clarify=answerer,
    )


async def test_without_anyone_to_ask_the_model_is_told_to_carry_on() -> None:
    with pytest.raises(ToolError) as error:
        await clarify("Which database?", _ctx(None))
    assert str(error.value) == (
        "No one can answer questions in this session; proceed with your best judgement."
    )


async def test_question_and_choices_reach_the_user_and_the_answer_comes_back() -> None:
    asked: list[tuple[str, list[str] | None]] = []

    async def answer(question: str, choices: list[str] | None) -> str:
        asked.append((question, choices))
        return "  PostgreSQL "

    result = await clarify(
        " Which database? ", _ctx(answer), choices=["SQLite", " PostgreSQL", " "]
    )
    assert asked == [("Which database?", ["SQLite", "PostgreSQL"])]
    assert result == "The user answered: PostgreSQL"


async def test_no_choices_means_a_free_answer() -> None:
    asked: list[list[str] | None] = []

    async def answer(question: str, choices: list[str] | None) -> str:
        asked.append(choices)
        return "blue"

    await clarify("Favourite colour?", _ctx(answer), choices=[])
    assert asked == [None]


async def test_a_blank_answer_tells_the_model_to_decide() -> None:
    async def blank(question: str, choices: list[str] | None) -> str:
        return "   "

    result = await clarify("Proceed?", _ctx(blank))
    assert "no answer" in result and "best judgement" in result


async def test_empty_question_is_refused_before_bothering_the_user() -> None:
    calls: list[str] = []

    async def answer(question: str, choices: list[str] | None) -> str:
        calls.append(question)
        return "x"

    with pytest.raises(ToolError):
        await clarify("  ", _ctx(answer))
    assert calls == []


async def test_a_question_that_lapsed_unanswered_says_so() -> None:
    async def lapsed(question: str, choices: list[str] | None) -> None:
        return None

    result = await clarify("Proceed?", _ctx(lapsed))
    assert "timed out unanswered" in result


def test_clarify_is_an_interactive_tool_in_its_own_toolset() -> None:
    tool = next(t for t in builtin_tools() if t.name == "clarify")
    assert tool.interactive and tool.toolset == "clarify"
    assert tool.parameters["required"] == ["question"]
    assert set(tool.parameters["properties"]) == {"question", "choices"}
