"""The fleet benchmark's workload, its round-robin client (against a small
HTTP server that streams as `vllm serve` does: no vLLM here) and its chart.
`make bench LINE=0.32.0 B=fleet` runs them against three `vllm serve`."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pstack.harness.bench import round_robin
from pstack.harness.bench.charts import write_fleet_chart
from pstack.harness.bench.fleet import (NUM_DOCUMENTS, NUM_SERVERS,
                                        QUESTIONS_PER_DOCUMENT,
                                        kv_transfer_config, prompts)

FIRST_CHUNK_DELAY = 0.05


class StreamingServer:
    """Answers POST /v1/completions with `max_tokens` SSE chunks, the first
    one after FIRST_CHUNK_DELAY; records the prompts it was asked."""

    def __init__(self, status: int = 200):
        self.prompts: list[str] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):

            def do_POST(self):
                body = json.loads(
                    self.rfile.read(int(self.headers["Content-Length"])))
                owner.prompts.append(body["prompt"])
                self.send_response(status)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                if status != 200:
                    return
                time.sleep(FIRST_CHUNK_DELAY)
                for i in range(body["max_tokens"]):
                    chunk = {"choices": [{"text": f" t{i}"}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def servers():
    started = [StreamingServer() for _ in range(3)]
    yield started
    for server in started:
        server.close()


def test_the_client_sends_prompt_k_to_server_k_mod_n(servers):
    asked = [f"prompt {k}" for k in range(10)]
    result = round_robin.run([s.url for s in servers], "m", asked, 4, 2)
    for i, server in enumerate(servers):
        assert sorted(server.prompts) == sorted(asked[i::3])
    assert [a.server for a in result.answers] == [k % 3 for k in range(10)]
    assert all(a.output_tokens == 4 for a in result.answers)
    assert all(FIRST_CHUNK_DELAY <= a.ttft_s <= a.latency_s
               for a in result.answers)
    assert result.output_throughput == pytest.approx(40 / result.duration_s)
    assert result.ttft_percentile(0) == min(a.ttft_s for a in result.answers)
    assert result.ttft_percentile(100) == max(a.ttft_s for a in result.answers)


def test_a_server_error_fails_the_run():
    failing = StreamingServer(status=500)
    try:
        with pytest.raises(RuntimeError, match="HTTP 500"):
            round_robin.run([failing.url], "m", ["a", "b"], 2, 1)
    finally:
        failing.close()


def test_every_document_is_asked_of_every_server():
    asked = prompts()
    assert len(asked) == NUM_DOCUMENTS * QUESTIONS_PER_DOCUMENT
    assert len(set(asked)) == len(asked)
    servers_by_document: dict[str, set[int]] = {}
    for k, prompt in enumerate(asked):
        document = prompt.rsplit("\nQuestion", 1)[0]
        servers_by_document.setdefault(document, set()).add(k % NUM_SERVERS)
    assert len(servers_by_document) == NUM_DOCUMENTS
    # Without a shared tier, every server computes every document.
    assert all(len(s) == NUM_SERVERS for s in servers_by_document.values())
    assert prompts() == asked


def test_the_shared_fleet_adds_an_fs_tier_below_the_cpu_tier(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(
        json.dumps(
            dict(hidden_size=64,
                 num_attention_heads=2,
                 num_key_value_heads=2,
                 num_hidden_layers=2)))
    cpu_only = kv_transfer_config(str(model), None)
    shared = kv_transfer_config(str(model), tmp_path / "root")
    extra = shared["kv_connector_extra_config"]
    assert extra["spec_name"] == "TieringOffloadingSpec"
    assert extra["secondary_tiers"] == [{
        "type": "fs",
        "root_dir": str(tmp_path / "root")
    }]
    assert "secondary_tiers" not in cpu_only["kv_connector_extra_config"]
    assert (extra["cpu_bytes_to_use"] == cpu_only["kv_connector_extra_config"]
            ["cpu_bytes_to_use"])


def test_fleet_chart_is_a_reproducible_png(tmp_path):
    rows = [{
        "fleet": "CPU tiers only",
        "output_throughput": 10.0,
        "ttft_p50_s": 1.0
    }, {
        "fleet": "shared fs tier",
        "output_throughput": 25.0,
        "ttft_p50_s": 0.2
    }]
    first, second = tmp_path / "a.png", tmp_path / "b.png"
    write_fleet_chart(rows, "title", first)
    write_fleet_chart(rows, "title", second)
    assert first.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert first.read_bytes() == second.read_bytes()
