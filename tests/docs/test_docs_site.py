"""The documentation stays true to the repository: the performance page is what the published
bench results render, and every page the README links to exists."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_performance_page_is_rendered_from_the_published_results() -> None:
    run = subprocess.run(
        [sys.executable, "bench/performance_page.py", "--check"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr


def test_the_readme_links_to_pages_that_exist_and_stays_short() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    targets = re.findall(r"\]\(((?:docs/)?[\w./-]+\.md)(?:#[\w-]+)?\)", readme)
    assert targets, "the README links into the docs"
    assert [target for target in targets if not (ROOT / target).is_file()] == []
    assert len(readme.splitlines()) < 200
