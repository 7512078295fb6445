"""requirements-dev.lock pins every package pyproject.toml asks for, in a version it allows.

CI installs the lock (`.ci/run`), so a dependency added to pyproject.toml without running
`scripts/lock` would be missing there; this names it before CI does."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def _pins() -> dict[str, str]:
    text = (ROOT / "requirements-dev.lock").read_text(encoding="utf-8")
    found = re.findall(r"^([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s\\;]+)", text, flags=re.M)
    return {canonicalize_name(name): version for name, version in found}


def _wanted() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras: dict[str, list[str]] = project["optional-dependencies"]
    return [Requirement(spec) for spec in [*project["dependencies"], *extras["dev"]]]


def test_the_lock_pins_every_dependency_in_an_allowed_version() -> None:
    pins = _pins()
    missing = [str(r) for r in _wanted() if canonicalize_name(r.name) not in pins]
    assert not missing, f"run scripts/lock: the lock lacks {missing}"
    outside = [
        f"{r} (locked {pins[canonicalize_name(r.name)]})"
        for r in _wanted()
        if not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)
    ]
    assert not outside, f"run scripts/lock: locked versions outside pyproject's ranges: {outside}"


def test_every_extra_is_part_of_the_dev_environment() -> None:
    """The tests import every optional part, so [dev] (and with it the lock) holds them all."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    dev = {canonicalize_name(Requirement(s).name) for s in project["optional-dependencies"]["dev"]}
    for extra, specs in project["optional-dependencies"].items():
        names = {canonicalize_name(Requirement(s).name) for s in specs}
        assert names <= dev, f"[{extra}] has {sorted(names - dev)} that [dev] lacks"
