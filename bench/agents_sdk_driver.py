"""The OpenAI Agents SDK's side of the loop and sessions benches; runs in bench/.venv-agents-sdk.

Usage: python agents_sdk_driver.py <loop|sessions> '<json params>' (see driver_kit). Each turn
builds a fresh `Agent` on `OpenAIChatCompletionsModel` (Chat Completions, its own AsyncOpenAI
client pointed at the scripted server) with the `noop` function tool, and runs it with
`Runner.run_streamed`, draining the events. Tracing is off (it would export to the network).
It imports nothing from talaria (different venv).
"""

from __future__ import annotations

from typing import Any

import driver_kit
from common import MODEL


def _agent(url: str) -> Any:
    from agents import Agent, OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    set_tracing_disabled(True)

    @function_tool
    def noop(n: int) -> str:
        """Do nothing and say ok."""
        return "ok"

    model = OpenAIChatCompletionsModel(MODEL, AsyncOpenAI(base_url=url, api_key="x"))
    return Agent(name="bench", instructions="You are a helpful agent.", model=model, tools=[noop])


class AgentsSDKSide(driver_kit.Side):
    async def turn(self, message: str) -> int:
        from agents import Runner

        agent = _agent(self.url)
        result = Runner.run_streamed(agent, message, max_turns=driver_kit.MAX_STEPS)
        async for _ in result.stream_events():
            pass
        self.kept(agent)
        if result.final_output != "done":
            raise RuntimeError(f"final answer {result.final_output!r}")
        return len(result.raw_responses)


if __name__ == "__main__":
    driver_kit.main(driver_kit.coroutine_commands(AgentsSDKSide))
