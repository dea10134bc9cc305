"""The shared fakes themselves: the OpenAI-compatible endpoint answers many requests at once
(threaded, its delay spent in parallel) and keeps exact counts while doing so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from fakes.openai_server import COMPLETION_TOKENS, PROMPT_TOKENS, FakeOpenAI, user_text
from fakes.openai_server import stats as fake_stats


def test_the_fake_endpoint_answers_requests_in_parallel_and_counts_them_all():
    n, latency_s = 32, 0.2
    fake = FakeOpenAI(lambda body: f"echo {user_text(body)}", latency_s=latency_s)
    fake.fail(429, {"Retry-After": "0"})
    fake.reply("scripted first")
    with fake.serve() as base_url, requests.Session() as client:
        client.mount("http://", requests.adapters.HTTPAdapter(pool_maxsize=n))

        def ask(i: int) -> requests.Response:
            body = {"model": "m", "messages": [{"role": "user", "content": f"request {i}"}]}
            return client.post(
                f"{base_url}/chat/completions", json=body, headers={"Authorization": f"Bearer k{i}"}, timeout=30
            )

        first, second = ask(-2), ask(-1)  # the script, in order
        started = time.perf_counter()
        with ThreadPoolExecutor(n) as pool:
            answers = list(pool.map(ask, range(n)))
        elapsed = time.perf_counter() - started

    assert first.status_code == 429 and first.headers["Retry-After"] == "0" and "error" in first.json()
    assert second.json()["choices"][0]["message"]["content"] == "scripted first"
    assert [a.json()["choices"][0]["message"]["content"] for a in answers] == [f"echo request {i}" for i in range(n)]
    assert answers[0].json()["model"] == "m" and answers[0].json()["usage"]["prompt_tokens"] == PROMPT_TOKENS
    assert elapsed < n * latency_s / 4  # served side by side, not one after another
    assert fake.calls == n + 2 and len(fake.requests) == n + 2
    assert (fake.prompt_tokens, fake.completion_tokens) == ((n + 1) * PROMPT_TOKENS, (n + 1) * COMPLETION_TOKENS)
    assert sorted(fake.auth[2:]) == sorted(f"Bearer k{i}" for i in range(n))


def test_without_a_script_or_a_policy_the_fake_says_so():
    fake = FakeOpenAI()
    with fake.serve() as base_url:
        r = requests.post(f"{base_url}/chat/completions", json={"model": "m", "messages": []}, timeout=10)
    assert r.status_code == 500 and "no scripted reply and no policy" in r.json()["error"]["message"]
    assert fake.calls == 1 and fake.prompt_tokens == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_the_fake_endpoint_runs_in_the_background_and_stops_on_a_signal(tmp_path, signum):
    # In the background (`&`, nohup) standard input is /dev/null: the server must not need it.
    out = tmp_path / "url.txt"
    with open(out, "w") as stdout:
        proc = subprocess.Popen(
            [sys.executable, "-m", "fakes.openai_server"],
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
            start_new_session=True,  # no terminal, as under nohup
        )
    try:
        deadline = time.monotonic() + 30
        while not out.read_text().strip() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, proc.stderr.read().decode()
        url = out.read_text().strip()
        assert fake_stats(url)["calls"] == 0  # it serves
        proc.send_signal(signum)
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_the_fakes_policies_answer_the_per_item_taste_question_with_ids_of_the_list():
    # Without it, every per-item question of the taste protocol was an HTTP 500, retried with back-off.
    from fakes.openai_server import scripted_agent, uniform_agent
    from ops.studies.alignment.per_item import LIST_ANSWER, check_list_answer

    movies = [12, 13, 14]
    text = "\n".join(
        [
            "You remember: [5] An old favourite",
            "Here is a list of movies. For each one, decide whether you would watch it.",
            *(f"[{m}] Movie {m} | genres: Drama | n/a" for m in movies),
            LIST_ANSWER.format(ids=movies),
        ]
    )
    body = {
        "model": "m",
        "seed": 7,
        "messages": [{"role": "system", "content": "who"}, {"role": "user", "content": text}],
    }
    assert check_list_answer(scripted_agent(body), movies) == {12}
    assert check_list_answer(uniform_agent(body), movies) <= set(movies)
