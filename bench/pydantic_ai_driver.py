"""pydantic-ai's side of the loop and sessions benches; runs inside bench/.venv-pydantic-ai.

Usage: python pydantic_ai_driver.py <loop|sessions> '<json params>' (see driver_kit). Each
turn builds a fresh `Agent` on `OpenAIChatModel` (Chat Completions, its own OpenAI client, as
the docs show for a custom base URL) with the `noop` tool, and runs it with an event-stream
handler, so every model call streams. It imports nothing from talaria (different venv).
"""

from __future__ import annotations

from typing import Any

import driver_kit
from common import MODEL


def _agent(url: str) -> Any:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=url, api_key="x"))
    agent = Agent(model, instructions="You are a helpful agent.")

    @agent.tool_plain
    def noop(n: int) -> str:
        """Do nothing and say ok."""
        return "ok"

    return agent


async def _drain(ctx: Any, events: Any) -> None:
    async for _ in events:
        pass


class PydanticAISide(driver_kit.Side):
    async def turn(self, message: str) -> int:
        from pydantic_ai.messages import ModelResponse
        from pydantic_ai.usage import UsageLimits

        agent = _agent(self.url)
        limits = UsageLimits(request_limit=driver_kit.MAX_STEPS)
        result = await agent.run(message, event_stream_handler=_drain, usage_limits=limits)
        self.kept(agent)
        if result.output != "done":
            raise RuntimeError(f"final answer {result.output!r}")
        return sum(isinstance(m, ModelResponse) for m in result.all_messages())


if __name__ == "__main__":
    driver_kit.main(driver_kit.coroutine_commands(PydanticAISide))
