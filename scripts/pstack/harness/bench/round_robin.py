"""A client that sends a list of prompts to several `vllm serve` processes
in turn (prompt k to server k mod N), as a round-robin load balancer in front
of a fleet would, and times each answer.

Each prompt is a streamed /v1/completions request of a fixed number of
output tokens (ignore_eos); its time to first token is the time to the first
streamed chunk. `clients` threads take the prompts in order, so that about
`clients` requests are in flight at any time.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    server: int
    ttft_s: float
    latency_s: float
    output_tokens: int


@dataclass(frozen=True)
class RunResult:
    answers: list[Answer]
    duration_s: float

    @property
    def output_throughput(self) -> float:
        """Output tokens per second over the whole run."""
        return sum(a.output_tokens for a in self.answers) / self.duration_s

    def ttft_percentile(self, percent: float) -> float:
        ttfts = sorted(a.ttft_s for a in self.answers)
        index = min(len(ttfts) - 1, round(percent / 100 * (len(ttfts) - 1)))
        return ttfts[index]


def complete(url: str, model: str, prompt: str, output_tokens: int,
             server: int) -> Answer:
    """One streamed completion; raises on an HTTP error or a short answer."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname,
                                            parts.port,
                                            timeout=600)
    body = json.dumps({
        "model": model,
        "prompt": prompt,
        "max_tokens": output_tokens,
        "ignore_eos": True,
        "temperature": 0,
        "stream": True,
    })
    start = time.perf_counter()
    first = None
    try:
        connection.request("POST",
                           "/v1/completions",
                           body,
                           headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            raise RuntimeError(f"{url}: HTTP {response.status}: "
                               f"{response.read()[:500]!r}")
        for line in response:
            if not line.startswith(b"data: ") or line.strip(
            ) == b"data: [DONE]":
                continue
            if first is None:
                first = time.perf_counter()
    finally:
        connection.close()
    end = time.perf_counter()
    if first is None:
        raise RuntimeError(f"{url}: the answer had no token")
    # The chunks are not counted: vLLM merges tokens into one chunk when the
    # API server falls behind. With ignore_eos the answer has the tokens
    # asked for.
    return Answer(server, first - start, end - start, output_tokens)


def run(urls: list[str], model: str, prompts: list[str], output_tokens: int,
        clients: int) -> RunResult:
    """Every prompt, prompt k to urls[k % len(urls)], by `clients` threads."""
    next_index = 0
    lock = threading.Lock()
    answers: list[Answer | None] = [None] * len(prompts)
    errors: list[BaseException] = []

    def client() -> None:
        nonlocal next_index
        while True:
            with lock:
                if next_index == len(prompts) or errors:
                    return
                index = next_index
                next_index += 1
            server = index % len(urls)
            try:
                answers[index] = complete(urls[server], model, prompts[index],
                                          output_tokens, server)
            except Exception as e:  # raised by run(), in the caller's thread
                errors.append(e)
                return

    start = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    duration = time.perf_counter() - start
    if errors:
        raise errors[0]
    return RunResult([a for a in answers if a is not None], duration)
