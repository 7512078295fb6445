"""The ACP agent side: initialize, sessions (new, load, modes), prompts and cancel.

Session ids are talaria session ids: what runs in the editor is in the home's store, so it shows
in `talaria sessions list` and resumes in `talaria chat --resume`, and a session started there
loads here.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, TypeGuard

from acp import PROTOCOL_VERSION, RequestError
from acp.schema import (
    AgentCapabilities,
    CloseSessionResponse,
    Implementation,
    InitializeResponse,
    ListSessionsResponse,
    LoadSessionResponse,
    McpCapabilities,
    NewSessionResponse,
    PromptCapabilities,
    PromptResponse,
    ResumeSessionResponse,
    SessionCapabilities,
    SessionCloseCapabilities,
    SessionListCapabilities,
    SessionResumeCapabilities,
    SetSessionConfigOptionResponse,
    SetSessionModeResponse,
)

from talaria import __version__
from talaria.acp.errors import invalid, reasoned
from talaria.acp.listing import session_page
from talaria.acp.mcp_servers import editor_servers
from talaria.acp.modes import MODE_IDS, SANDBOX_OPTION
from talaria.acp.session import AcpSession, SessionSettings
from talaria.loop.session import new_session_id
from talaria.store.factory import store_location

log = logging.getLogger("talaria.acp")

STEER_METHOD = "talaria/steer"
"""The steer extension (`_talaria/steer` on the wire), advertised in the capabilities'
`_meta` as `{"talaria": {"steer": true}}`."""


REWIND_METHOD = "talaria/rewind"
"""Back to before a turn, or a step of it (`_talaria/rewind` on the wire): `{sessionId, turn,
step?, files?, conversation?}`, answered with what was restored, kept and left alone."""


def _text_param(params: dict[str, Any], name: str) -> str:
    value = params.get(name)
    if not isinstance(value, str) or not value.strip():
        raise invalid(f"'{name}' must be a non-empty string")
    return value


def _number(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def too_wide(folder: Path) -> bool:
    """The file system root, the home directory, or a folder that holds the home."""
    real = folder.resolve()
    home = Path.home().resolve()
    return real == real.parent or real == home or real in home.parents


class TalariaAcpAgent:
    """Implements the SDK's `acp.Agent` protocol (methods it lacks answer "method not found")."""

    def __init__(self, settings: SessionSettings) -> None:
        self._settings = settings
        self._conn: Any = None
        self._client_caps: Any = None
        self._sessions: dict[str, AcpSession] = {}
        self._closed: set[str] = set()
        """Sessions closed on this connection: a prompt to one is told so."""

    def on_connect(self, conn: Any) -> None:
        self._conn = conn

    @reasoned
    async def initialize(
        self,
        protocol_version: int,
        client_capabilities: Any = None,
        client_info: Any = None,
        **_: Any,
    ) -> InitializeResponse:
        self._client_caps = client_capabilities
        return InitializeResponse(
            protocol_version=min(protocol_version, PROTOCOL_VERSION),
            agent_capabilities=AgentCapabilities(
                load_session=True,
                prompt_capabilities=PromptCapabilities(
                    image=self._settings.images, audio=False, embedded_context=True
                ),
                mcp_capabilities=McpCapabilities(http=True, sse=True),
                session_capabilities=SessionCapabilities(
                    list=SessionListCapabilities(),
                    resume=SessionResumeCapabilities(),
                    close=SessionCloseCapabilities(),
                ),
                field_meta={"talaria": {"steer": True, "queue": True, "rewind": True}},
            ),
            agent_info=Implementation(name="talaria", title="talaria", version=__version__),
        )

    @reasoned
    async def authenticate(self, method_id: str, **_: Any) -> None:
        return None  # keys come from the config, the environment or --api-key

    @reasoned
    async def new_session(
        self, cwd: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> NewSessionResponse:
        session = self._open(new_session_id(), cwd, mcp_servers)
        try:  # stored now, so that a client may list it, or prompt it from another process
            await session.agent.astart_session()
        except BaseException:
            await self._drop(session)
            raise
        asyncio.get_running_loop().call_soon(session.announce_commands)  # after the answer
        return NewSessionResponse(
            session_id=session.id,
            modes=session.modes.state(),
            config_options=session.config_options(),
        )

    @reasoned
    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> LoadSessionResponse:
        session = await self._reopen(session_id, cwd, mcp_servers)
        await session.replay()
        asyncio.get_running_loop().call_soon(session.announce_commands)
        return LoadSessionResponse(
            modes=session.modes.state(), config_options=session.config_options()
        )

    @reasoned
    async def resume_session(
        self, cwd: str, session_id: str, mcp_servers: list[Any] | None = None, **_: Any
    ) -> ResumeSessionResponse:
        """Like load, without replaying the conversation (the editor still shows it)."""
        session = await self._reopen(session_id, cwd, mcp_servers)
        return ResumeSessionResponse(
            modes=session.modes.state(), config_options=session.config_options()
        )

    @reasoned
    async def list_sessions(
        self, cwd: str | None = None, cursor: str | None = None, **_: Any
    ) -> ListSessionsResponse:
        store = await asyncio.to_thread(self._settings.open_store)
        try:
            return await asyncio.to_thread(session_page, store, cwd, cursor)
        finally:
            store.close()

    @reasoned
    async def close_session(self, session_id: str, **_: Any) -> CloseSessionResponse:
        session = self._session(session_id)
        self._sessions.pop(session_id, None)
        self._closed.add(session_id)
        try:
            await session.end()
        except Exception:
            log.warning("session %s did not close cleanly", session_id, exc_info=True)
        return CloseSessionResponse()

    @reasoned
    async def set_session_mode(
        self, session_id: str, mode_id: str, **_: Any
    ) -> SetSessionModeResponse:
        session = self._session(session_id)
        if mode_id not in MODE_IDS:
            raise invalid(f"unknown mode {mode_id!r}; modes: {', '.join(MODE_IDS)}")
        session.modes.set(mode_id)
        return SetSessionModeResponse()

    @reasoned
    async def set_config_option(
        self, config_id: str, session_id: str, value: str | bool, **_: Any
    ) -> SetSessionConfigOptionResponse:
        session = self._session(session_id)
        if config_id != SANDBOX_OPTION:
            raise invalid(f"unknown option {config_id!r}; options: {SANDBOX_OPTION}")
        session.set_sandbox(str(value))
        return SetSessionConfigOptionResponse(config_options=session.config_options())

    @reasoned
    async def prompt(self, prompt: list[Any], session_id: str, **_: Any) -> PromptResponse:
        stop = await self._session(session_id).prompt(prompt)
        return PromptResponse(stop_reason=stop)  # type: ignore[arg-type]

    @reasoned
    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """talaria's extension methods (the SDK strips the leading underscore of the wire
        name): `_talaria/steer` with `{sessionId, text, turnId?}`, `_talaria/rewind` with
        `{sessionId, turn, step?, files?, conversation?}`."""
        if method not in (STEER_METHOD, REWIND_METHOD):
            raise RequestError.method_not_found(f"_{method}")
        session = self._session(_text_param(params, "sessionId"))
        if method == REWIND_METHOD:
            turn, step = params.get("turn"), params.get("step")
            files, conversation = params.get("files"), params.get("conversation")
            if not _number(turn) or not (step is None or _number(step)):
                raise invalid("'turn' and 'step' must be numbers")
            if not all(isinstance(v, bool | None) for v in (files, conversation)):
                raise invalid("'files' and 'conversation' must be true or false")
            whole = step is None if conversation is None else conversation
            return await session.rewind(turn, files is not False, whole, step)
        turn_id = params.get("turnId")
        if turn_id is not None and not isinstance(turn_id, str):
            raise invalid("'turnId' must be a string")
        return session.steer(_text_param(params, "text"), turn_id)

    async def cancel(self, session_id: str, **_: Any) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.cancel()

    async def close(self) -> None:
        """End every session (the connection is gone)."""
        for session in list(self._sessions.values()):
            await self._drop(session)

    def _open(self, session_id: str, cwd: str, mcp_servers: list[Any] | None) -> AcpSession:
        folder = Path(cwd)
        if not folder.is_absolute() or not folder.is_dir():
            raise invalid(f"cwd must be an existing absolute directory, got {cwd!r}")
        if too_wide(folder):
            raise invalid(
                f"refusing to open a session in {cwd!r}: a session's folder is writable to every "
                "command it runs, and this one holds the whole home directory (SSH keys, shell "
                "start-up files); open a project folder instead"
            )
        servers = editor_servers(mcp_servers)
        session = AcpSession(
            session_id, self._conn, self._client_caps, self._settings, folder, servers
        )
        self._sessions[session.id] = session
        return session

    async def _reopen(self, session_id: str, cwd: str, mcp_servers: list[Any] | None) -> AcpSession:
        """A stored session, opened afresh for this editor (one already open here ends first)."""
        old = self._sessions.pop(session_id, None)
        if old is not None:
            await old.end()
        session = self._open(session_id, cwd, mcp_servers)
        if session.agent.store.get_session(session_id) is None:
            await self._drop(session)
            raise invalid(f"no session {session_id!r} in {store_location(session.agent.config)}")
        self._closed.discard(session_id)
        return session

    def _session(self, session_id: str) -> AcpSession:
        session = self._sessions.get(session_id)
        if session is not None:
            return session
        if session_id in self._closed:
            raise invalid(
                f"session {session_id!r} was closed; session/load or session/resume reopens it"
            )
        raise invalid(f"unknown session {session_id!r}; call session/new or session/load")

    async def _drop(self, session: AcpSession) -> None:
        self._sessions.pop(session.id, None)
        try:
            await session.close()
        except Exception:
            log.warning("session %s did not close cleanly", session.id, exc_info=True)
