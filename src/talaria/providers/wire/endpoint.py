"""What every wire client has in common, so each wire module holds only its differences.

A wire client is one endpoint and model over an official SDK: it builds the JSON body itself,
sends it through the SDK's low-level ``post`` and reads the answer into a `ModelResponse`.
The shared part is the identity used to attribute errors (provider, model, base URL), the
`LoopBoundClient` that owns the SDK client, and the rule that every failure leaves
``complete`` as a `ProviderError` which knows whether visible output had already streamed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from talaria.providers.base import ModelRequest, ModelResponse, StreamHandler
from talaria.providers.errors import ErrorKind, ProviderError
from talaria.providers.resilience.classify import classify_exception
from talaria.providers.transport.sdk import LoopBoundClient


class Reader(Protocol):
    """The per-call state that turns an answer into a `ModelResponse`."""

    output_started: bool


R = TypeVar("R", bound=Reader)


class EndpointClient(ABC, Generic[R]):
    """A `ModelClient` skeleton: subclasses build the body, make a reader and exchange."""

    api_mode: str

    def __init__(
        self, model: str, *, base_url: str, provider: str, sdk_factory: Callable[[], Any]
    ) -> None:
        self.model = model
        self.provider = provider
        self.base_url = base_url
        self._sdk = LoopBoundClient(sdk_factory)

    @abstractmethod
    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The exact JSON body ``complete`` sends (public so that callers can inspect it)."""

    @abstractmethod
    def _reader(self, stream: StreamHandler) -> R:
        """Fresh per-call state that forwards streamed deltas to ``stream``."""

    @abstractmethod
    async def _exchange(
        self, client: Any, body: dict[str, Any], reader: R, *, streaming: bool
    ) -> ModelResponse:
        """Send ``body`` with the SDK ``client`` and read the answer through ``reader``."""

    async def complete(self, request: ModelRequest, stream: StreamHandler) -> ModelResponse:
        body = self.build_body(request)
        client = self._client()
        reader = self._reader(stream)
        try:
            return await self._exchange(client, body, reader, streaming=request.stream)
        except Exception as exc:
            raise classify_exception(
                exc, provider=self.provider, model=self.model, output_started=reader.output_started
            ) from exc

    async def aclose(self) -> None:
        await self._sdk.aclose()

    def _client(self) -> Any:
        """The SDK client for this event loop; failing to make one is our configuration's fault."""
        try:
            return self._sdk.get()
        except Exception as exc:
            raise self._error(ErrorKind.CONFIG, str(exc)) from exc

    def _error(
        self, kind: ErrorKind, message: str, *, body: Any = None, output_started: bool = False
    ) -> ProviderError:
        return ProviderError(
            message,
            kind=kind,
            provider=self.provider,
            model=self.model,
            body=body,
            output_started=output_started,
        )
