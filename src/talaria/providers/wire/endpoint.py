"""What every wire client has in common, so each wire module holds only its differences.

A wire client is one endpoint and model: it builds the JSON body itself, posts it through
talaria's shared HTTP pool (`transport.http`) and reads the answer into a `ModelResponse`.
The shared part is the identity used to attribute errors (provider, model, base URL), the
`Endpoint` (URL, auth headers, query) and the rule that every failure leaves ``complete`` as a
`ProviderError` which knows whether visible output had already streamed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from contextlib import aclosing, asynccontextmanager
from typing import Any, Generic, Protocol, TypeVar

from talaria import fastjson
from talaria.core import ModelRequest, ModelResponse, StreamHandler
from talaria.providers.errors import ErrorKind, ProviderError
from talaria.providers.profiles import ModelProfile, profile_for
from talaria.providers.resilience.classify import classify_exception
from talaria.providers.transport import http, sse
from talaria.providers.transport.auth import Endpoint


class Reader(Protocol):
    """The per-call state that turns an answer into a `ModelResponse`."""

    output_started: bool


R = TypeVar("R", bound=Reader)


class EndpointClient(ABC, Generic[R]):
    """A `ModelClient` skeleton: subclasses build the body, make a reader and exchange."""

    api_mode: str

    def __init__(
        self,
        model: str,
        *,
        endpoint: Endpoint,
        provider: str,
        timeout: float = 600.0,
        profile: ModelProfile | None = None,
    ) -> None:
        self.model = model
        self.provider = provider
        self.endpoint = endpoint
        self.base_url = endpoint.base_url
        self.timeout = timeout
        self.profile = profile or profile_for(
            provider=provider, model=model, base_url=endpoint.base_url, api_mode=self.api_mode
        )

    @abstractmethod
    def build_body(self, request: ModelRequest) -> dict[str, Any]:
        """The exact JSON body ``complete`` sends (public so that callers can inspect it)."""

    @abstractmethod
    def _reader(self, stream: StreamHandler) -> R:
        """Fresh per-call state that forwards streamed deltas to ``stream``."""

    @abstractmethod
    async def _exchange(self, body: dict[str, Any], reader: R, *, streaming: bool) -> ModelResponse:
        """Send ``body`` and read the answer through ``reader``."""

    async def complete(self, request: ModelRequest, stream: StreamHandler) -> ModelResponse:
        if self.endpoint.problem:
            raise self._error(ErrorKind.CONFIG, self.endpoint.problem)
        body = self.build_body(request)
        reader = self._reader(stream)
        try:
            return await self._exchange(body, reader, streaming=request.stream)
        except Exception as exc:
            raise classify_exception(
                exc, provider=self.provider, model=self.model, output_started=reader.output_started
            ) from exc

    async def aclose(self) -> None:
        """Nothing to release: connections belong to the loop's shared pool."""

    async def _post(self, path: str, body: dict[str, Any]) -> Any:
        """POST ``body`` to ``path`` and return the decoded JSON answer."""
        answer = await http.json_answer(
            "POST",
            self.endpoint.url(path),
            self.endpoint.headers,
            body=body,
            seconds=self.timeout,
            params=self.endpoint.params,
        )
        fastjson.warm()  # for the calls after this one (see talaria.fastjson)
        return answer

    @asynccontextmanager
    async def _events(
        self, path: str, body: dict[str, Any], on_done: Callable[[], None] | None = None
    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        """POST ``body`` and yield the answer's SSE events as dicts (closed on exit);
        `on_done` is called at OpenAI's ``[DONE]`` sentinel."""
        async with (
            http.post_json(
                self.endpoint.url(path),
                body,
                self.endpoint.headers,
                seconds=self.timeout,
                params=self.endpoint.params,
            ) as response,
            aclosing(sse.json_events(response.aiter_bytes(), on_done)) as events,
        ):
            fastjson.warm()  # the answer has begun: the import delays no request (talaria.fastjson)
            yield events

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
