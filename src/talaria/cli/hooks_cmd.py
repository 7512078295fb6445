"""`talaria hooks list|trust|untrust [DIR]`: see the configured hooks, and let a project's
hooks run (docs/hooks.md). Trust is for the project's settings files as they are now: an edit
to them needs `talaria hooks trust` again."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from talaria.cli.main import EXIT_AGENT_FAILURE, EXIT_OK

if TYPE_CHECKING:
    from talaria.config import Config


def add_parser(commands: Any) -> None:
    hooks = commands.add_parser("hooks", help="list hooks; trust a project's hooks")
    hooks.add_argument("action", choices=["list", "trust", "untrust"])
    hooks.add_argument("project", nargs="?", help="the project folder (default: here)")
    hooks.add_argument("--home")


def run_hooks(args: argparse.Namespace) -> int:
    from talaria.config import Config
    from talaria.hooks.settings import HookSettingsError, project_files, trust

    config = Config.load(args.home)
    project = Path(args.project or ".").resolve()
    files = [path for path in project_files(project) if path.is_file()]
    if args.action == "list":
        try:
            _list(config, project, files)
        except HookSettingsError as exc:
            print(f"talaria: {exc}", file=sys.stderr)
            return EXIT_AGENT_FAILURE
    elif args.action == "untrust":
        trust(config.home, project, revoke=True)
        print(f"the hooks of {project} no longer run")
    elif not files:
        print(f"talaria: {project} has no .talaria/settings.json", file=sys.stderr)
        return EXIT_AGENT_FAILURE
    else:
        trust(config.home, project)
        print(f"trusted the hooks of {project} as its settings files are now")
    return EXIT_OK


def _list(config: Config, project: Path, files: list[Path]) -> None:
    from talaria.hooks.bridge import describe
    from talaria.hooks.settings import HOME_FILE, is_trusted, read_hooks

    timeout = float(config.hooks.timeout)
    home_file = config.home / HOME_FILE
    print(f"home ({home_file}):")
    for line in describe(read_hooks([home_file], timeout)) or ["(none)"]:
        print(f"  {line}")
    if files:
        trusted = is_trusted(config.home, project)
        state = "trusted" if trusted else "NOT trusted: they do not run (talaria hooks trust)"
        print(f"project ({project}, {state}):")
        for line in describe(read_hooks(files, timeout)) or ["(none)"]:
            print(f"  {line}")
