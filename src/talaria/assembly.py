"""Builds the Runtime and the session for an Agent on its first turn, and child agents.

Kept apart from the facade so that `import talaria` and `Agent(...)` stay cheap: this module
pulls in the tools, the store and the provider plumbing. It is the one place that knows how
the parts fit, so `loop/` and `agent_tools/` never construct an Agent themselves.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from talaria.agent_tools.catalog import Capabilities, select_tools
from talaria.agent_tools.services import AgentServices
from talaria.agent_tools.todo import TodoList
from talaria.events import ClarifyRequested, Notice, SessionContinued
from talaria.interaction import RequestLapsed
from talaria.interrupt import InterruptSignal
from talaria.loop.runtime import Runtime
from talaria.loop.session import SessionHandle
from talaria.providers.factory import resolve_spec
from talaria.providers.resilience.caller import CallerSettings, ModelCaller
from talaria.providers.resilience.chain import ChainEntry, ModelChain
from talaria.providers.resilience.credentials import CredentialSource
from talaria.skills.catalog import SkillCatalog, skill_roots
from talaria.skills.index import IN_USE, in_use
from talaria.tools.executor import ExecutorSettings, ToolExecutor
from talaria.tools.sandbox import SandboxPolicy

if TYPE_CHECKING:
    from talaria.agent_tools.delegate import ChildPlan, ChildRunner
    from talaria.callbacks import CallbackSink
    from talaria.checkpoints import SessionCheckpoints
    from talaria.events import SubagentOrigin
    from talaria.interaction import Interactions
    from talaria.plugins.hooks import HookBus
    from talaria.policy.approval import ApprovalState
    from talaria.skills.catalog import Skill
    from talaria.spec import AgentSpec
    from talaria.store.base import SessionStore
    from talaria.tools.base import Tool


class Agent(Protocol):
    """What assembly reads of the agent it builds for (`talaria.agent.Agent`): its spec and
    the parts that live while it runs."""

    spec: AgentSpec
    sink: CallbackSink
    interactions: Interactions
    hooks: HookBus
    approvals: ApprovalState

    @property
    def store(self) -> SessionStore: ...

    @property
    def session_id(self) -> str | None: ...

    def add_side_usage(self, usage: Any) -> None: ...

    def child(self, session_id: str, plan: ChildPlan, origin: SubagentOrigin) -> Any:
        """A `delegate_task` child of this agent."""
        ...


def assemble_runtime(agent: Agent, interrupt: InterruptSignal | None = None) -> Runtime:
    """The runtime of `agent.spec`, wired to the agent's events, requests, hooks and approvals;
    `interrupt` is the signal `Agent.interrupt` sets (None: a fresh one nobody sets)."""
    spec = agent.spec
    config = spec.config
    entries, credentials = _chain_entries(spec)
    chain = ModelChain(entries)
    if chain.active.spec is not None and chain.active.base_url.startswith("https://"):
        from talaria.providers.transport.http11 import load_ssl_context_soon

        load_ssl_context_soon()  # the CA bundle loads while the rest is assembled
    memory = _memory_store(spec)
    caps = Capabilities(
        can_clarify=agent.interactions.can_answer("clarify"),
        memory_enabled=memory is not None,
        can_delegate=spec.depth == 0,
        web_enabled=bool(config.web.enabled),
        browser_enabled=bool(config.browser.enabled),
    )
    _load_plugins(agent)
    extra = [*spec.tools, *agent.hooks.tools]
    tools = {
        tool.name: tool
        for tool in select_tools(spec.toolsets, caps, extra, config)
        if spec.only_tools is None or tool.name in spec.only_tools
    }
    delegate = _delegate_runner(agent, tools)
    executor = ToolExecutor(
        tools=tools,
        hooks=agent.hooks,
        approvals=agent.approvals,
        interactions=agent.interactions,
        settings=ExecutorSettings(
            max_workers=int(config.agent.max_tool_workers),
            default_timeout=float(config.agent.tool_timeout),
            approval_timeout=float(config.approvals.timeout),
            spill_dir=spec.home / "tool_outputs",
        ),
    )
    skills = skill_catalog(spec.home, spec.cwd, agent.hooks.skill_dirs)
    services = AgentServices(
        store=agent.store,
        skills=skills,
        memory=memory,
        todos=TodoList(),
        session_id=agent.session_id or "",
        delegate=delegate,
    )
    runtime = Runtime(
        config=config,
        caller=ModelCaller(
            chain,
            agent.sink,
            CallerSettings.from_config(config.model, config.retry),
            credentials=credentials,
        ),
        tools=tools,
        executor=executor,
        hooks=agent.hooks,
        emit=agent.sink,
        interrupt=interrupt if interrupt is not None else InterruptSignal(),
        cwd=spec.cwd,
        home=spec.home,
        max_iterations=spec.max_iterations,
        stream=spec.stream,
        services=services,
        interactions=agent.interactions,
        clarify=_clarify(agent) if caps.can_clarify else None,
        sandbox=SandboxPolicy.from_config(config, spec.cwd),
        skills=skills,
        stop_hook="subagent_stop" if spec.depth > 0 else "stop",
    )
    from talaria.loop.context import load_context
    from talaria.tools.builtin.processes import follow_session
    from talaria.tools.session_end import follow

    for follower in (services.follow, follow_session, follow):
        agent.sink.subscribe(SessionContinued, follower)
    runtime.context = load_context(spec.config, runtime)
    runtime.tool_source = _mcp_servers(spec)
    runtime.allowed_tools = spec.only_tools
    return runtime


def skill_catalog(home: Path, cwd: Path, extra: Sequence[Path]) -> SkillCatalog:
    """The skills an agent in `cwd` finds (docs/skills.md), descriptions scanned for prompt
    injection."""
    return SkillCatalog(skill_roots(home, cwd, extra), scan=_scan_description)


def _scan_description(text: str) -> list[str]:
    """The injection scan, loaded only once a skill is found (most agents have none)."""
    from talaria.prompt.injection import scan_text

    return scan_text(text)


def agent_services(runtime: Runtime) -> AgentServices:
    """The agent tools' state of a runtime built here (it always has one)."""
    if runtime.services is None:
        raise RuntimeError("this runtime was not assembled for an agent (no AgentServices)")
    return runtime.services


def _mcp_servers(spec: AgentSpec) -> Any:
    """The configured MCP servers (a child shares its parent's); None without any."""
    if spec.shared_tools is not None:
        return spec.shared_tools.shared()
    if not spec.config.mcp_servers:
        return None
    from talaria.mcp.setup import connect_configured

    return connect_configured(spec.config, spec.home, cwd=spec.cwd)


def _chain_entries(spec: AgentSpec) -> tuple[list[ChainEntry], list[CredentialSource | None]]:
    """The primary and the fallbacks, each with where its key can be refreshed from."""
    config = spec.config
    choice = spec.model
    model = choice.model
    entries: list[ChainEntry] = []
    credentials: list[CredentialSource | None] = []
    if model is not None and hasattr(model, "complete"):
        entries.append(ChainEntry(spec=None, fixed_client=model))
        credentials.append(None)
    else:
        entries.append(
            ChainEntry(
                spec=resolve_spec(
                    model=model or config.model.default,
                    provider=choice.provider or config.model.provider,
                    base_url=choice.base_url or config.model.base_url,
                    api_key=choice.api_key or config.model.api_key,
                    api_mode=choice.api_mode or config.model.api_mode,
                    options=config.model.options,
                    profiles=config.profiles,
                )
            )
        )
        credentials.append(
            CredentialSource(
                refresh=config.model.api_key_refresh,
                command=config.model.api_key_command,
                read_config=lambda: _file_key(spec.home),
            )
        )
    for fallback in spec.fallbacks:
        if not isinstance(fallback, dict):
            entries.append(ChainEntry(spec=None, fixed_client=fallback))
            credentials.append(None)
            continue
        entries.append(
            ChainEntry(
                spec=resolve_spec(
                    model=fallback.get("model"),
                    provider=fallback.get("provider"),
                    base_url=fallback.get("base_url"),
                    api_key=fallback.get("api_key"),
                    api_mode=fallback.get("api_mode"),
                    options=fallback.get("options", {}),
                    profiles=config.profiles,
                )
            )
        )
        credentials.append(
            CredentialSource(
                refresh=fallback.get("api_key_refresh"), command=fallback.get("api_key_command")
            )
        )
    return entries, credentials


def _file_key(home: Path) -> str | None:
    """``model.api_key`` as the config file says now (it may have been edited mid-session)."""
    from talaria.config import read_config_file

    model = read_config_file(home / "config.yaml").get("model")
    key = model.get("api_key") if isinstance(model, dict) else None
    return str(key) if key else None


def _memory_store(spec: AgentSpec) -> Any:
    config = spec.config
    if not config.memory.enabled:
        return None
    from talaria.agent_tools.memory import MemoryStore

    return MemoryStore(
        spec.home,
        memory_char_limit=config.memory.memory_char_limit,
        user_char_limit=config.memory.user_char_limit,
    )


def _clarify(agent: Agent) -> Any:
    timeout = float(agent.spec.config.approvals.timeout)

    async def ask(call_id: str, question: str, choices: list[str] | None) -> str | None:
        """The user's answer; None when the question lapsed unanswered."""
        try:
            return await agent.interactions.ask(
                lambda request_id: ClarifyRequested(request_id, call_id, question, choices),
                timeout,
            )
        except RequestLapsed:
            return None

    return ask


def _delegate_runner(agent: Agent, tools: dict[str, Tool]) -> ChildRunner | None:
    """The runner of `delegate_task` when the agent offers it, which then lists the named
    sub-agents found in the home and the project (a file that cannot be read is a notice)."""
    if agent.spec.depth > 0 or "delegate_task" not in tools:
        return None
    from talaria.agent_tools.catalog import builtin_tools
    from talaria.agent_tools.delegate import ChildRunner
    from talaria.agent_tools.subagents import load_definitions

    spec = agent.spec
    definitions = load_definitions(
        spec.home,
        spec.cwd,
        lambda: {tool.name: tool.toolset for tool in builtin_tools(spec.config)},
    )
    for problem in definitions.problems:
        agent.sink(Notice("warning", f"sub-agent definition skipped: {problem}"))
    runner = ChildRunner(spec.config, agent.child, agent.add_side_usage, definitions)
    tools["delegate_task"] = runner.tool()
    return runner


def _load_plugins(agent: Agent) -> None:
    spec = agent.spec
    if spec.depth > 0:
        return  # a child shares its parent's hook bus, plugins already loaded
    from talaria.plugins.loader import load_plugins

    required = spec.config.plugins.required
    for failure in load_plugins(agent.hooks, spec.home, list(spec.plugins), required):
        agent.sink(Notice("warning", failure.message))
    _settings_hooks(agent)


def _settings_hooks(agent: Agent) -> None:
    """The hooks of the settings files (the home's; the project's once trusted), registered
    on the agent's bus; a project's untrusted hooks are one notice."""
    from talaria.hooks.settings import HookSettingsError, load_hooks

    spec = agent.spec
    try:
        loaded = load_hooks(spec.home, spec.cwd, float(spec.config.hooks.timeout))
    except HookSettingsError as exc:
        raise ValueError(f"hooks not loaded: {exc}") from None
    if loaded.untrusted:
        files = ", ".join(str(path) for path in loaded.untrusted)
        agent.sink(
            Notice(
                "warning",
                f"this project's hooks ({files}) do not run until you trust them: "
                "`talaria hooks list` shows them, `talaria hooks trust` runs them",
            )
        )
    if loaded.hooks.events:
        # The runner (subprocess, urllib) is loaded only for an agent that has hooks.
        from talaria.hooks.bridge import SettingsHooks

        approvals = agent.approvals
        SettingsHooks(loaded.hooks, spec.cwd, agent.sink, lambda: approvals.mode).register(
            agent.hooks
        )


def open_session(
    agent: Agent, runtime: Runtime, system_message: str | None, session_ref: str | None
) -> SessionHandle:
    """Resume the session `session_ref` names if the store has it, else start one (with that
    name, or a new id)."""
    store = agent.store
    session_id = session_ref
    if session_id:
        session_id = _resolve_existing(store, session_id)
    info = store.get_session(session_id) if session_id else None
    if info is not None:
        return _named_skills(
            agent, runtime, _resumed(info, store, runtime, system_message, agent.spec.cwd)
        )
    from talaria.loop.session import new_session_id
    from talaria.store.base import SessionExists

    new_id = session_id or new_session_id()
    agent_services(runtime).todos = TodoList()  # a new session starts with none
    prompt = system_message or _system_prompt(agent, runtime)
    active = runtime.caller.chain.active
    try:
        store.create_session(
            new_id,
            source=agent.spec.source,
            model=active.model,
            provider=active.provider,
            api_mode=active.api_mode,
            system_prompt=prompt,
            parent_session_id=agent.spec.parent_session_id,
            cwd=str(agent.spec.cwd),
        )
    except SessionExists:  # another process started it a moment ago: join that session
        info = store.get_session(new_id)
        if info is None:
            raise
        return _named_skills(
            agent, runtime, _resumed(info, store, runtime, system_message, agent.spec.cwd)
        )
    return SessionHandle(new_id, store, prompt)


_READ_ONLY_TOOLSETS = frozenset({"clarify", "todo", "memory", "session_search", "web", "skills"})
"""Toolsets whose tools change no file in the workspace."""


def may_write(tool: Tool | None) -> bool:
    """Could this tool change a file (an unknown one, say an MCP tool not listed yet, could)?"""
    return tool is None or tool.toolset not in _READ_ONLY_TOOLSETS


_WRITING_TOOLSETS = frozenset({"file", "terminal", "code", "browser", "mcp"})
"""Toolsets whose tools change files as their job: a checkpoint is taken before a step that
calls one. Another tool that may write (a custom one, say) is covered by the turn's own
checkpoints, so a tool loop over cheap functions does not walk the workspace at every step."""


def writes_files(tool: Tool | None) -> bool:
    """Is a checkpoint due before a step that calls this tool (an unknown one: yes)?"""
    return tool is None or tool.toolset in _WRITING_TOOLSETS


def open_checkpoints(agent: Agent, runtime: Runtime, session_id: str) -> SessionCheckpoints:
    """The session's checkpoints of the roots its commands may write (the working directory
    where the sandbox confines nothing); old sessions' checkpoints are pruned first. A
    delegate's changes are in its parent's turn, so a child records none of its own; an agent
    whose tools cannot write files records none either."""
    from talaria.checkpoints import SessionCheckpoints, checkpoints_root, prune, session_dir

    spec = agent.spec
    settings = spec.config.checkpoints
    home = spec.home
    writes = runtime.tool_source is not None or any(map(may_write, runtime.tools.values()))
    enabled = bool(settings.enabled) and spec.depth == 0 and writes
    if enabled:
        prune(
            home,
            max_age_days=float(settings.max_age_days),
            max_total_mb=float(settings.max_total_mb),
            keep=session_id,
        )
    roots = runtime.sandbox.root_paths if runtime.sandbox is not None else []
    return SessionCheckpoints(
        session_dir(home, session_id),
        roots or [spec.cwd],
        enabled=enabled,
        max_file_bytes=int(settings.max_file_bytes),
        exclude=[home, checkpoints_root(home)],
    )


def _named_skills(agent: Agent, runtime: Runtime, handle: SessionHandle) -> SessionHandle:
    """A resumed session whose stored prompt lacks a skill named now (`--skill` with
    `--resume`) gets it in each request's newest message (the stored prompt stays)."""
    prompt = handle.system_prompt or ""
    missing = [name for name in agent.spec.skills if f"{IN_USE}{name}\n" not in prompt]
    if missing and runtime.skills is not None:
        named = active_skills(runtime.skills.skills(), missing)
        handle.skills_in_use = "\n\n".join(in_use(name, body) for name, body in named)
    return handle


def _resumed(
    info: Any, store: Any, runtime: Runtime, system_message: str | None, cwd: Path
) -> SessionHandle:
    history = store.load_messages(info.id)
    handle = SessionHandle(
        info.id, store, system_message or info.system_prompt, history, next_seq=len(history)
    )
    if info.cwd and info.cwd != str(cwd):  # resumed elsewhere: the stored prompt names info.cwd
        handle.cwd_note = (
            f"The working directory is now {cwd} (this session started in {info.cwd}, the "
            "directory the system prompt names): commands run here and relative paths "
            "resolve here."
        )
    agent_services(runtime).todos = TodoList.from_json(store.get_state(info.id, "todos"))
    return handle


def _resolve_existing(store: Any, ref: str) -> str:
    """`Agent(session_id=...)` resumes a stored session named exactly by its id or title (or
    'latest'); any other string names a new session. No prefix matching here: a new id that
    happens to start an old one must not resume it."""
    if store.get_session(ref) is not None:
        return ref
    from talaria.store.base import AmbiguousSession, SessionNotFound

    try:
        resolved = str(store.resolve(ref))
    except (SessionNotFound, AmbiguousSession):
        if ref == "latest":
            raise
        return ref
    info = store.get_session(resolved)
    return resolved if ref == "latest" or (info is not None and info.title == ref) else ref


def _system_prompt(agent: Agent, runtime: Runtime) -> str:
    from talaria.prompt.builder import PromptInputs, build_system_prompt

    memory = agent_services(runtime).memory
    skills = runtime.skills.skills() if runtime.skills is not None else []
    return build_system_prompt(
        PromptInputs(
            home=agent.spec.home,
            cwd=agent.spec.cwd,
            tool_names=list(runtime.tools),
            memory_snapshot=memory.snapshot() if memory is not None else "",
            skills=skills,
            skills_budget=int(agent.spec.config.skills.index_chars),
            active_skills=active_skills(skills, agent.spec.skills),
            lean=runtime.profile == "lean",
            notes=agent.spec.prompt_notes,
        )
    )


def active_skills(found: list[Skill], names: Sequence[str]) -> list[tuple[str, str]]:
    """(name, instructions) of each skill named at start-up; ValueError for a name that no
    skill folder has."""
    by_name = {skill.name: skill for skill in found}
    missing = [name for name in names if name not in by_name]
    if missing:
        known = ", ".join(by_name) or "none"
        raise ValueError(f"no skill named {', '.join(missing)}; available skills: {known}")
    return [
        (name, by_name[name].path.read_text(encoding="utf-8", errors="replace")) for name in names
    ]


def credential_sources(agent: Agent) -> list[CredentialSource | None]:
    """Where each chain entry's key can be re-read from, in chain order (a durable worker
    refreshes a rejected key itself: the turn's caller runs in the workflow, without keys)."""
    return _chain_entries(agent.spec)[1]
