"""Whatever a tool raises or returns, the turn goes on: `SystemExit`, `KeyboardInterrupt` and
other `BaseException`s are tool errors, every return value becomes text or an error result,
and what the model reads names the failure in words (no class name, no traceback)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import MODES, scripted_agent, tool_results
from talaria import tool
from talaria.testing import ScriptedProvider, call, text

INTERNALS = re.compile(r"Traceback|\b[A-Z]\w*(Error|Exception|Exit|Interrupt)\b|talaria/|File \"")


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class _Stop(BaseException):
    """A BaseException of a tool's own."""


def _parse(value: str) -> int:
    parser = argparse.ArgumentParser(prog="count", exit_on_error=False)
    parser.add_argument("--n", type=int, required=True)
    return int(parser.parse_args(value.split()).n)


def _generate() -> Iterator[str]:
    yield "first"
    yield "second"


async def _agenerate() -> AsyncIterator[str]:
    yield "one"
    yield "two"


def _self_referencing() -> dict[str, Any]:
    loop: dict[str, Any] = {"name": "loop"}
    loop["self"] = loop
    return loop


RAISED: dict[str, Callable[[], Any]] = {
    "exit": lambda: sys.exit(3),
    "exit_message": lambda: sys.exit("the tool gave up: disk full"),
    "keyboard": lambda: (_ for _ in ()).throw(KeyboardInterrupt()),
    "generator_exit": lambda: (_ for _ in ()).throw(GeneratorExit()),
    "own_base": lambda: (_ for _ in ()).throw(_Stop("stopped on purpose")),
    "argparse": lambda: _parse("--n ten"),
    "empty_error": lambda: (_ for _ in ()).throw(ValueError()),
}
RETURNED: dict[str, Callable[[], Any]] = {
    "self_referencing": _self_referencing,
    "huge_int": lambda: 7**6000,
    "unprintable": _Unprintable,
    "bytes": lambda: b"\x00\x01binary",
    "generator": _generate,
    "nested_unprintable": lambda: {"value": _Unprintable(), "huge": [10**5000]},
}


@tool
def misbehave(kind: str) -> Any:
    """Misbehave in the named way.

    Args:
        kind: which way
    """
    return {**RAISED, **RETURNED}[kind]()


@tool
async def amisbehave(kind: str) -> Any:
    """Misbehave in the named way, asynchronously.

    Args:
        kind: which way
    """
    if kind == "agenerator":
        return _agenerate()
    return {**RAISED, **RETURNED}[kind]()


def _run(tmp_path: Path, name: str, kind: str, mode: str = "chat_completions") -> dict[str, Any]:
    script = [call(name, {"kind": kind}), text("carried on")]
    with ScriptedProvider(script) as server:
        agent = scripted_agent(server, tmp_path, mode, tools=[misbehave, amisbehave])
        seen: list[Any] = []
        agent.subscribe(seen.append)
        result = agent.run_conversation("misbehave")
        assert server.invalid_requests == []
    assert result["completed"] and result["final_response"] == "carried on"
    for event in seen:
        assert not INTERNALS.search(repr(getattr(event, "content", ""))), event
    return result


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["misbehave", "amisbehave"])
@pytest.mark.parametrize("kind", sorted(RAISED))
def test_what_a_tool_raises_is_a_tool_error(tmp_path: Path, name: str, kind: str) -> None:
    (result,) = tool_results(_run(tmp_path, name, kind))
    assert result.startswith(f"Error: {name} ")
    assert not INTERNALS.search(result), result


def test_the_failure_reads_well(tmp_path: Path) -> None:
    outcomes = {kind: tool_results(_run(tmp_path, "misbehave", kind))[0] for kind in RAISED}
    assert outcomes["exit"] == (
        "Error: misbehave tried to end the process (exit status 3); the call failed and "
        "nothing else was stopped."
    )
    assert outcomes["exit_message"] == "Error: misbehave failed: the tool gave up: disk full"
    assert outcomes["own_base"] == "Error: misbehave failed: stopped on purpose"
    assert outcomes["empty_error"] == "Error: misbehave failed unexpectedly and gave no reason."


@pytest.mark.timeout(60)
@pytest.mark.parametrize("mode", MODES)
def test_a_tool_exiting_does_not_stop_the_turn_in_any_mode(tmp_path: Path, mode: str) -> None:
    (result,) = tool_results(_run(tmp_path, "misbehave", "exit", mode))
    assert "tried to end the process" in result


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["misbehave", "amisbehave"])
def test_every_return_value_becomes_text(tmp_path: Path, name: str) -> None:
    results = {kind: tool_results(_run(tmp_path, name, kind))[0] for kind in RETURNED}
    assert results["self_referencing"] == '{"name":"loop","self":"(a reference back to itself)"}'
    assert results["huge_int"] == _digits(7**6000)
    assert results["unprintable"] == (
        "Error: the tool returned a value that cannot be shown as text"
    )
    assert results["bytes"] == "[binary output (8 bytes) not shown]"
    assert results["generator"] == "first\nsecond"
    nested = results["nested_unprintable"]
    assert nested.startswith('{"value":"(a value that cannot be shown as text)","huge":["1000')


def test_an_async_generator_is_read_to_its_end(tmp_path: Path) -> None:
    assert tool_results(_run(tmp_path, "amisbehave", "agenerator")) == ["one\ntwo"]


def _digits(number: int) -> str:
    import decimal

    return str(decimal.Decimal(number))
