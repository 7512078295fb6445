#!/usr/bin/env bash
# Create bench/.venv-hermes with the reference implementation (hermes-agent 0.19.0) so the
# benches can drive it in its own interpreter, isolated from talaria's dependencies.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
venv="$here/.venv-hermes"
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install "hermes-agent==0.19.0"
"$venv/bin/python" -c "import run_agent, hermes_state; print('reference ready:', run_agent.__file__)"
