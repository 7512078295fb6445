"""`talaria doctor`: what is configured, what is reachable, what is missing, in one screen.

Every check is independent and fails soft: the point is to show all the problems at once.
Exit code 0 when a model is configured and its endpoint answers, 2 otherwise.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from talaria.cli.main import EXIT_AGENT_FAILURE, EXIT_OK

if TYPE_CHECKING:
    from talaria.config import Config

OK, BAD, NONE = "✓", "✗", "–"


@dataclass(frozen=True, slots=True)
class Check:
    label: str
    mark: str
    detail: str


def _mask(key: str) -> str:
    return f"…{key[-4:]}" if len(key) > 8 else "(set)"


def probe_endpoint(base_url: str, api_key: str, api_mode: str, timeout: float = 3.0) -> Check:
    """GET the endpoint's model list: proves the URL answers and says whether the key works."""
    import urllib.error
    import urllib.request

    if api_mode == "anthropic_messages":
        url = base_url.rstrip("/") + "/v1/models"
        headers = {"x-api-key": api_key, "anthropic-version": "2023-06-01"}
    else:
        url = base_url.rstrip("/") + "/models"
        headers = {"Authorization": f"Bearer {api_key}"}
    started = time.monotonic()
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=timeout
        ) as response:
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Check("endpoint", BAD, f"{url} unreachable: {reason}")
    took = f"{time.monotonic() - started:.2f}s"
    if status in (401, 403):
        return Check("endpoint", BAD, f"{url} answered {status}: the API key was refused")
    if status == 404:
        return Check("endpoint", OK, f"{url.rsplit('/', 1)[0]} answers ({took}; no model list)")
    if status >= 400:
        return Check("endpoint", BAD, f"{url} answered HTTP {status}")
    return Check("endpoint", OK, f"{url} answers ({took})")


def _config_checks(home: Path) -> tuple[list[Check], Any]:
    from talaria.config import Config, ConfigError

    path = home / "config.yaml"
    checks = [
        Check(
            "home",
            OK if home.exists() else NONE,
            str(home) + ("" if home.exists() else " (created on first use)"),
        )
    ]
    try:
        config = Config.load(home)
    except ConfigError as exc:
        return [*checks, Check("config", BAD, str(exc))], None
    checks.append(
        Check(
            "config",
            OK if path.exists() else NONE,
            str(path) if path.exists() else "no config.yaml (defaults and environment)",
        )
    )
    return checks, config


def _model_checks(config: Config) -> tuple[list[Check], bool]:
    from talaria.providers.errors import ProviderError
    from talaria.providers.factory import resolve_spec

    model = config.model.default
    if not model:
        return [
            Check("model", BAD, "none configured: talaria config set model.default <model>")
        ], False
    try:
        spec = resolve_spec(
            model=model,
            provider=config.model.provider,
            base_url=config.model.base_url,
            api_key=config.model.api_key,
            api_mode=config.model.api_mode,
            profiles=config.profiles,
        )
    except (ProviderError, ValueError) as exc:
        return [Check("model", BAD, f"{model}: {exc}")], False
    from talaria.providers.resolve import LOCAL_KEY

    key = (
        Check("key", NONE, "not needed (local endpoint)")
        if spec.api_key == LOCAL_KEY
        else Check("key", OK, _mask(spec.api_key))
    )
    checks = [Check("model", OK, f"{spec.label} ({spec.api_mode})"), key, _profile_check(spec)]
    endpoint = probe_endpoint(spec.base_url, spec.api_key, spec.api_mode)
    fallbacks = config.fallback_providers
    labels = ", ".join(
        f"{f.get('provider', '?')}:{f.get('model', '?')}" for f in fallbacks if isinstance(f, dict)
    )
    checks += [endpoint, Check("fallbacks", OK if fallbacks else NONE, labels or "none")]
    checks.append(prompt_check(config, _served_window(spec) if endpoint.mark == OK else None))
    return checks, endpoint.mark == OK


def _profile_check(spec: Any) -> Check:
    """What the model's profile changes in its requests (the table's facts and overrides)."""
    from talaria.providers.factory import profile_of_spec
    from talaria.providers.profiles.profile import describe

    return Check("profile", OK, describe(profile_of_spec(spec)))


def _served_window(spec: Any) -> int | None:
    """The window a local server really serves (None elsewhere: the table decides)."""
    import asyncio

    from talaria.providers.profiles.context_windows import fetch_endpoint_context_length
    from talaria.providers.resolve import is_loopback

    if not is_loopback(spec.base_url):
        return None
    probe = fetch_endpoint_context_length(spec.base_url, spec.api_key, spec.model, spec.api_mode)
    return asyncio.run(probe)


def prompt_check(config: Config, window: int | None) -> Check:
    """How big the first request's fixed part is in each profile, and which one applies."""
    from talaria.cli.render import format_tokens
    from talaria.prompt.profile import choose_profile

    sizes = {profile: _prompt_size(config, profile == "lean") for profile in ("full", "lean")}
    setting = str(config.prompt.profile)
    lean_below = int(config.prompt.lean_below)
    chosen = choose_profile(setting, window, lean_below)
    served = f"window {format_tokens(window)} · " if window else ""
    detail = " · ".join(
        f"{name} ~{format_tokens(tokens)} tokens ({tools} tools)"
        for name, (tokens, tools) in sizes.items()
    )
    rule = f"auto: lean below {format_tokens(lean_below)}" if setting == "auto" else setting
    return Check("prompt", OK, f"{served}{chosen} ({rule}) · {detail}")


def _prompt_size(config: Config, lean: bool) -> tuple[int, int]:
    """Estimated tokens of the system prompt plus tool schemas, and the number of tools."""
    from talaria.agent_tools.catalog import Capabilities, select_tools
    from talaria.assembly import skill_catalog
    from talaria.context.tokens import estimate_text_tokens, estimate_tokens
    from talaria.prompt.builder import PromptInputs, build_system_prompt
    from talaria.prompt.profile import LEAN_TOOLS, lean_schema

    caps = Capabilities(True, bool(config.memory.enabled), True)
    tools = [t for t in select_tools(None, caps) if not lean or t.name in LEAN_TOOLS]
    schemas = [lean_schema(t.schema()) if lean else t.schema() for t in tools]
    prompt = build_system_prompt(
        PromptInputs(
            home=config.home,
            cwd=Path.cwd(),
            tool_names=[t.name for t in tools],
            skills=skill_catalog(config.home, Path.cwd(), []).skills(),
            skills_budget=int(config.skills.index_chars),
            lean=lean,
        )
    )
    return estimate_text_tokens(prompt) + estimate_tokens([], schemas), len(tools)


def _environment_checks() -> list[Check]:
    from talaria.cli.first_run import KEY_VARIABLES, detect_local_servers

    keys = " · ".join(f"{name} {OK if os.environ.get(name) else NONE}" for name in KEY_VARIABLES)
    servers = detect_local_servers()
    local = ", ".join(f"{s.name} {s.base_url} ({len(s.models)} models)" for s in servers)
    return [
        Check("env keys", OK if any(os.environ.get(k) for k in KEY_VARIABLES) else NONE, keys),
        Check("local", OK if servers else NONE, local or "no model server on the usual ports"),
    ]


def _store_check(config: Config) -> Check:
    """The sessions of the store the agent uses (`store.url`, else the home's state.db)."""
    if config is None:
        return Check("sessions", NONE, "not checked: the configuration does not load")
    from talaria.store.base import StoreError
    from talaria.store.factory import existing_store, store_location

    where = store_location(config)
    try:
        store = existing_store(config)
        if store is None:
            return Check("sessions", NONE, f"none yet ({where})")
        try:
            count = len(store.list_sessions(limit=100_000))
        finally:
            store.close()
    except StoreError as exc:
        return Check("sessions", BAD, f"{where}: {exc}")
    return Check("sessions", OK, f"{count} in {where}")


def _tool_checks() -> list[Check]:
    from importlib.metadata import PackageNotFoundError, version

    programs = " · ".join(
        f"{name} {OK if shutil.which(name) else NONE}" for name in ("bash", "git", "rg")
    )
    packages = []
    for name in required_packages():
        try:
            packages.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            packages.append(f"{name} {BAD} missing")
    return [
        Check("programs", OK if shutil.which("bash") else BAD, programs),
        Check("packages", BAD if any(BAD in p for p in packages) else OK, " · ".join(packages)),
    ]


def required_packages() -> list[str]:
    """The packages talaria itself requires (its extras are optional), as its metadata says:
    the model SDKs are not among them, since talaria speaks the wire APIs itself."""
    from importlib.metadata import PackageNotFoundError, requires

    try:
        declared = requires("talaria") or []
    except PackageNotFoundError:  # running from a source tree that was never installed
        return []
    names = [
        re.split(r"[\s\[<>=!~;]", line, maxsplit=1)[0]
        for line in declared
        if not re.search(r"extra\s*==", line)
    ]
    return [name for name in names if name]


def sandbox_check(config: Config, cwd: Path) -> Check:
    """Which sandbox commands run in here, or why none."""
    from talaria.tools.sandbox import SandboxPolicy, describe

    policy = SandboxPolicy.from_config(config, cwd)
    confined, detail = describe(policy, cwd)
    if confined:
        return Check("sandbox", OK, detail)
    return Check("sandbox", NONE if policy.mode == "full-access" else BAD, detail)


def _paint(mark: str) -> str:
    if not sys.stdout.isatty() or os.environ.get("NO_COLOR"):
        return mark
    colour = {OK: "32", BAD: "31"}.get(mark, "2")
    return f"\x1b[{colour}m{mark}\x1b[0m"


def report(checks: list[Check], paint: Callable[[str], str] = _paint) -> str:
    width = max(len(check.label) for check in checks)
    return "\n".join(
        f"  {check.label.ljust(width)}  {paint(check.mark)} {check.detail}" for check in checks
    )


def run_doctor(args: argparse.Namespace) -> int:
    from talaria import __version__
    from talaria.config import default_home

    home = Path(args.home).expanduser() if args.home else default_home()
    print(f"talaria {__version__} · Python {platform.python_version()} · {sys.platform}")
    checks, config = _config_checks(home)
    healthy = False
    if config is not None:
        model_checks, healthy = _model_checks(config)
        checks += [*model_checks, sandbox_check(config, Path.cwd())]
    checks += _environment_checks()
    checks.append(_store_check(config))
    checks += _tool_checks()
    print(report(checks))
    if not healthy:
        print(
            "\nnot ready: fix the ✗ lines above (talaria config set …, or pass -m/--base-url "
            "to talaria chat)"
        )
    return EXIT_OK if healthy else EXIT_AGENT_FAILURE
