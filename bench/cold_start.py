"""Cold start: how long until `talaria --version` returns, and until `talaria chat` shows its
prompt, against the reference's `hermes --help` and `hermes chat`.

Each command runs in a fresh process; the chat ones in a pseudo-terminal (80x24) that answers
the terminal's cursor-position requests like a real terminal would, timed until the prompt
character appears. Both chats point at the same scripted provider (own process) and a fresh,
empty home. The reference runs from bench/.venv-hermes (bench/setup_peers.sh installs
hermes-agent==0.19.0 there with `python3 -m venv` + pip); when it is missing the table says so.
Also checks that `talaria --version` imports none of rich, prompt_toolkit, openai, anthropic.

Run: python bench/cold_start.py [--reps 5]   (not part of CI)
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import (
    HERMES,
    MODEL,
    SETUP,
    ProviderProcess,
    Row,
    compile_talaria,
    median,
    reference_available,
    report,
)

TALARIA = Path(sys.executable).with_name("talaria")
HERMES_CLI = HERMES.python.with_name("hermes")
HEAVY = ("rich", "prompt_toolkit", "openai", "anthropic")
CPR_REQUEST, CPR_ANSWER = b"\x1b[6n", b"\x1b[1;1R"


def time_command(argv: list[str], env: dict[str, str], reps: int) -> list[float]:
    runs = []
    for _ in range(reps):
        started = time.perf_counter()
        subprocess.run(
            argv,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
            timeout=120,
        )
        runs.append(time.perf_counter() - started)
    return runs


def time_prompt(argv: list[str], env: dict[str, str], marker: str, timeout: float = 120) -> float:
    """Seconds from spawning `argv` in a pty until `marker` is on its screen."""
    import pexpect

    started = time.perf_counter()
    child = pexpect.spawn(argv[0], argv[1:], env=env, dimensions=(24, 80), timeout=timeout)
    seen = b""
    try:
        while marker.encode() not in seen:
            if time.perf_counter() - started > timeout:
                raise TimeoutError(f"{argv[0]} showed no prompt in {timeout:.0f}s")
            try:
                chunk = child.read_nonblocking(65536, timeout=0.05)
            except pexpect.TIMEOUT:
                continue
            if CPR_REQUEST in chunk:
                child.send(CPR_ANSWER)
            seen = seen[-4096:] + chunk
        return time.perf_counter() - started
    finally:
        child.terminate(force=True)


def version_imports() -> list[str]:
    """Heavy modules `talaria --version` loads (should be none)."""
    code = (
        "import sys\nfrom talaria.cli.main import main\ntry:\n    main(['--version'])\n"
        "except SystemExit:\n    pass\n"
        f"print('heavy:' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    line = out.stdout.strip().splitlines()[-1].removeprefix("heavy:")
    return [name for name in line.split(",") if name]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    compile_talaria()
    scratch = Path(tempfile.mkdtemp(prefix="bench-cold-"))
    reason = reference_available()
    rows: list[Row] = []
    with ProviderProcess(plan=[]) as provider:
        talaria_env = {**os.environ, "TALARIA_HOME": str(scratch / "talaria"), "TERM": "xterm"}
        hermes_env = {
            **os.environ,
            "HERMES_HOME": str(scratch / "hermes"),
            "TERM": "xterm",
            "OPENAI_BASE_URL": provider.url,
            "OPENAI_API_KEY": "x",
        }
        (scratch / "hermes").mkdir()
        version = time_command([str(TALARIA), "--version"], talaria_env, args.reps)
        chat_argv = [
            str(TALARIA),
            "chat",
            "-m",
            MODEL,
            "--base-url",
            provider.url,
            "--api-key",
            "x",
        ]
        chat = [time_prompt(chat_argv, talaria_env, "›") for _ in range(args.reps)]
        ref_help: float | str | None = reason
        ref_chat: float | str | None = reason
        if reason is None:
            ref_help = median(time_command([str(HERMES_CLI), "--help"], hermes_env, args.reps))
            ref_chat = median(
                [
                    time_prompt(
                        [str(HERMES_CLI), "chat", "-m", MODEL, "--provider", "custom"],
                        hermes_env,
                        "❯",
                    )
                    for _ in range(args.reps)
                ]
            )
        rows.append(Row("`--version` (reference: `hermes --help`)", median(version), ref_help))
        rows.append(Row("chat: prompt on screen", median(chat), ref_chat, unit="s"))
    shutil.rmtree(scratch, ignore_errors=True)
    heavy = version_imports()
    report(
        "cold_start",
        "Cold start (median of fresh processes)",
        rows,
        {
            "reps": args.reps,
            "talaria": str(TALARIA),
            "reference": str(HERMES_CLI) if reason is None else reason,
            "heavy imports on --version": ", ".join(heavy) or "none",
            "setup": f"{SETUP} hermes installs the reference",
        },
    )


if __name__ == "__main__":
    main()
