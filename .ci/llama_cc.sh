#!/usr/bin/env bash
# The compiler launcher of .ci/llama_server.sh's build (CMAKE_<LANG>_COMPILER_LAUNCHER): the
# optimisation level per source folder.  The test's tokens run in ggml's CPU kernels, so ggml
# keeps Release's -O3; llama.cpp's own library (src/: the model graphs, the sampler, the
# grammar a strict JSON schema becomes) runs once per token or less and gets -O1; the rest
# (common/: argument parsing, chat templates, JSON; the server's HTTP and JSON code) runs once
# per request and gets -O0.  Those two were four fifths of the compiler's time at -O3.
compiler=$1
shift
source_file=
previous=
for arg in "$@"; do
    [ "$previous" = -c ] && source_file=$arg
    previous=$arg
done
# The path inside the llama.cpp tree, so that a folder above it named src or ggml changes nothing.
case ${source_file##*/llama.cpp/} in
"") level= ;; # a link step: its flags stay
ggml/*) level= ;;
src/*) level=-O1 ;;
*) level=-O0 ;;
esac
if [ -n "$level" ]; then
    args=()
    for arg in "$@"; do
        case $arg in
        -O2 | -O3) args+=("$level") ;;
        *) args+=("$arg") ;;
        esac
    done
    exec "$compiler" "${args[@]}"
fi
exec "$compiler" "$@"
