"""One turn as an async iterator of its events: `async for event in agent.events(message)`.

The events are the typed ones of `talaria.events`, in the order the engine emits them, from
`TurnStarted` to `TurnFinished`; afterwards `result` holds the turn's `TurnResult`. Front ends
consume this one stream instead of bridging callbacks each in its own way.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

from talaria.events import Event

if TYPE_CHECKING:
    from talaria.core import TurnResult

Subscribe = Callable[[Callable[[Event], None], Sequence[str]], Callable[[], None]]


class TurnEvents:
    """The events of one turn, started when iteration starts. Leaving the loop early
    interrupts the turn (it still stops cleanly and saves what it has)."""

    def __init__(
        self,
        run: Callable[[], Coroutine[Any, Any, TurnResult]],
        subscribe: Subscribe,
        interrupt: Callable[[], None],
        answers: Sequence[str] = (),
    ) -> None:
        self._run = run
        self._subscribe = subscribe
        self._interrupt = interrupt
        self._answers = tuple(answers)
        self.result: TurnResult | None = None
        """The turn's result, once the iteration has ended."""

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._events()

    async def _events(self) -> AsyncIterator[Event]:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[Event | None] = asyncio.Queue()

        def deliver(event: Event) -> None:  # tools emit from their own threads too
            loop.call_soon_threadsafe(queue.put_nowait, event)

        unsubscribe = self._subscribe(deliver, self._answers)
        turn = loop.create_task(self._run())
        # scheduled after every event the turn delivered before it ended
        turn.add_done_callback(lambda _: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            self.result = turn.result()
        finally:
            unsubscribe()
            if not turn.done():
                self._interrupt()
                await asyncio.wait([turn])
