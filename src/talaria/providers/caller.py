"""One model call as the loop sees it: the chain, interrupts, and what a failure means.

The loop asks for a response; this module decides on which entry of the chain, and what to do
when that entry fails (fall back, or give up with the error attributed to its provider).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from talaria.events import EventSink, Notice, StatusChanged
from talaria.loop.interrupt import InterruptSignal
from talaria.providers.base import ModelClient, ModelRequest, ModelResponse, StreamHandler
from talaria.providers.chain import ModelChain
from talaria.providers.errors import ErrorKind, ProviderError

FALLBACK_KINDS = frozenset(
    {
        ErrorKind.RATE_LIMIT,
        ErrorKind.OVERLOADED,
        ErrorKind.SERVER,
        ErrorKind.AUTH,
        ErrorKind.CONNECTION,
        ErrorKind.TIMEOUT,
        ErrorKind.EMPTY_RESPONSE,
        ErrorKind.INVALID_RESPONSE,
    }
)


@dataclass
class CallResult:
    response: ModelResponse
    client: ModelClient
    attempts: int
    errors: list[ProviderError] = field(default_factory=list)


class ModelCaller:
    def __init__(self, chain: ModelChain, emit: EventSink) -> None:
        self.chain = chain
        self.emit = emit

    async def call(
        self, request: ModelRequest, stream: StreamHandler, interrupt: InterruptSignal
    ) -> CallResult:
        errors: list[ProviderError] = []
        attempts = 0
        while True:
            entry = self.chain.active
            client = entry.client()
            attempts += 1
            try:
                response = await interrupt.race(client.complete(request, stream))
                return CallResult(response, client, attempts, errors)
            except ProviderError as error:
                error.provider = error.provider or client.provider
                error.model = error.model or client.model
                errors.append(error)
                if error.kind not in FALLBACK_KINDS or error.output_started:
                    raise
                if not self.chain.advance():
                    raise
                self.emit(Notice("warning", f"{entry.label} failed ({error.kind.value}); "
                                            f"falling back to {self.chain.active.label}"))
                self.emit(StatusChanged("fallback", self.chain.active.label))
