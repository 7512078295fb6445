"""Events: watch a turn as it happens (what a chat window, a log or a progress bar shows).

`agent.events(...)` is the turn as an async stream of typed events (`talaria.events`); its
`.result` is the turn's result once the stream has ended.

    python examples/events.py
"""

from __future__ import annotations

import asyncio

from endpoint import endpoint

from talaria import Agent, events, tool


@tool
def word_count(text: str) -> int:
    """Count the words of a text.

    Args:
        text: the text
    """
    return len(text.split())


async def main() -> None:
    async with Agent(**endpoint(), tools=[word_count]) as agent:
        turn = agent.events("How many words are in 'the quick brown fox'?")
        async for event in turn:
            if isinstance(event, events.ToolStarted):
                print(f"-> {event.name}({event.arguments})")
            elif isinstance(event, events.ToolFinished):
                print(f"<- {event.name}: {event.result}")
            elif isinstance(event, events.TextDelta):
                print(event.text, end="", flush=True)
        print()
        assert turn.result is not None
        print("turn ended:", turn.result["turn_exit_reason"])


asyncio.run(main())
