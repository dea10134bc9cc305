"""The real-model test's server built two ways: how fast each reads a prompt and writes tokens.

`.ci/llama_server.sh` builds llama-server with Release's -O3 only in ggml, where the tokens
are computed, and -O1/-O0 elsewhere (`.ci/llama_cc.sh`), to halve CI's compile.  This checks
that the server the test talks to is not slower for it: both binaries serve the same model on
one thread, the same chat requests alternate between them (a long prompt of about 1,400
tokens, then short follow-ups, each answer 64 tokens at temperature 0), and llama-server's own
timings per token are printed for each, the second as a ratio of the first.

    LLAMA_FULL_OPT=1 .ci/llama_server.sh    # the -O3 build (its own cache entry)
    .ci/llama_server.sh                         # the build CI uses
    .venv/bin/python -m bench.llama_server --baseline <-O3 llama-server> --candidate <CI's llama-server> \\
        --model ~/.cache/simab-llm/models/gemma-3-270m-q4_k_m.gguf
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import time
import urllib.request
from contextlib import ExitStack

PROMPT = "Describe the following movies briefly. " + " ".join(
    f"Movie {i}: a drama about a family in a small town, released in {1950 + i}." for i in range(60)
)


def _post(port: int, content: str, max_tokens: int) -> dict:
    body = {
        "model": "m",
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "temperature": 0,
        "cache_prompt": False,  # every request reads its whole prompt: the prompt figure is a full read
    }
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=300) as answer:
        return json.load(answer)["timings"]


def _serve(stack: ExitStack, binary: str, model: str, port: int) -> None:
    server = subprocess.Popen(
        [binary, "-m", model, "--port", str(port), "-t", "1", "-np", "1", "-c", "4096"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    stack.callback(server.wait, 30)
    stack.callback(server.terminate)
    for _ in range(240):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
            return
        except OSError:
            time.sleep(0.25)
    raise SystemExit(f"{binary} did not answer /health on port {port} within 60 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="llama-server built with -O3 everywhere")
    parser.add_argument("--candidate", required=True, help="llama-server as .ci/llama_server.sh builds it")
    parser.add_argument("--model", required=True, help="the GGUF file both serve")
    parser.add_argument("--rounds", type=int, default=4, help="requests per binary and kind (default 4)")
    args = parser.parse_args()
    names = {"baseline": args.baseline, "candidate": args.candidate}
    figures: dict[str, dict[str, list[float]]] = {n: {"prompt": [], "token": []} for n in names}
    with ExitStack() as stack:
        ports = {}
        for i, (name, binary) in enumerate(names.items()):
            ports[name] = 18790 + i
            _serve(stack, binary, args.model, ports[name])
        for k in range(args.rounds):  # alternating, so what else the machine runs falls on both
            for name, port in ports.items():
                timings = _post(port, f"{PROMPT} (variant {k})", 64)
                figures[name]["prompt"].append(timings["prompt_per_token_ms"])
                figures[name]["token"].append(timings["predicted_per_token_ms"])
    print(f"{'':>10} {'prompt ms/token':>16} {'generated ms/token':>19}  (median of {args.rounds}, one thread)")
    base = {kind: statistics.median(v) for kind, v in figures["baseline"].items()}
    for name in names:
        med = {kind: statistics.median(v) for kind, v in figures[name].items()}
        ratio = "" if name == "baseline" else f"   ratio to baseline: prompt {med['prompt'] / base['prompt']:.2f}, "
        ratio += "" if name == "baseline" else f"generated {med['token'] / base['token']:.2f}"
        print(f"{name:>10} {med['prompt']:16.2f} {med['token']:19.2f}{ratio}")


if __name__ == "__main__":
    main()
