#!/usr/bin/env bash
# Create one venv per peer the benches compare talaria with, each isolated from talaria's
# dependencies and from the others (idempotent: an existing venv is only topped up):
#   bench/.venv-hermes        hermes-agent 0.19.0 (the reference implementation)
#   bench/.venv-pydantic-ai   pydantic-ai (slim, with its OpenAI model)
#   bench/.venv-agents-sdk    the OpenAI Agents SDK (openai-agents)
# Usage: bash bench/setup_peers.sh [hermes|pydantic-ai|agents-sdk ...]   (default: all three)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"

declare -A packages=(
    [hermes]="hermes-agent==0.19.0"
    [pydantic-ai]="pydantic-ai-slim[openai]==${PYDANTIC_AI_VERSION:-1.*}"
    [agents-sdk]="openai-agents==${AGENTS_SDK_VERSION:-0.*}"
)
declare -A probes=(
    [hermes]="import run_agent, hermes_state"
    [pydantic-ai]="import pydantic_ai, pydantic_ai.models.openai"
    [agents-sdk]="import agents"
)

setup() {
    local peer="$1" venv="$here/.venv-$1"
    if [ -z "${packages[$peer]:-}" ]; then
        echo "unknown peer: $peer (choose from: ${!packages[*]})" >&2
        return 2
    fi
    if [ ! -x "$venv/bin/python" ]; then
        "$python" -m venv "$venv"
    fi
    if ! "$venv/bin/python" -c "${probes[$peer]}" 2>/dev/null; then
        "$venv/bin/python" -m pip install --quiet --upgrade pip
        "$venv/bin/python" -m pip install --quiet "${packages[$peer]}"
    fi
    "$venv/bin/python" -c "${probes[$peer]}"
    echo "$peer ready: $("$venv/bin/python" -m pip show "${packages[$peer]%%[=\[]*}" | sed -n 's/^Version: //p')"
}

peers=("$@")
[ ${#peers[@]} -eq 0 ] && peers=(hermes pydantic-ai agents-sdk)
for peer in "${peers[@]}"; do
    setup "$peer"
done
