"""`talaria demo`: the README's fresh-machine command must really work offline."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_demo_runs_a_real_turn_offline(tmp_path: Path) -> None:
    env = {**os.environ, "TALARIA_HOME": str(tmp_path)}
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [sys.executable, "-m", "talaria.cli.main", "demo"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "→ write_file(" in out and "→ terminal(" in out
    assert "I added a test in `test_app.py`" in out
    assert "test file written: yes · invalid requests: 0" in out
    assert "Traceback" not in done.stderr
