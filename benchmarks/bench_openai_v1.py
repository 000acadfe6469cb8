"""Per-turn cost of ``POST /v1/chat/completions`` beside ``POST /api/chat`` (issue 40).

One real server (``ragline serve``, auth on, the local ONNX embedder, a collection of
20 short documents) whose chat model is the scripted one behind the OpenAI-compatible
test server (``ragline.testing.openai_server``): it answers at once, so a turn's time
is ragline's own work plus two local HTTP calls to that model server (tool decision,
streamed answer), the same for both endpoints. Each round sends the same first-message
question four ways in a rotating order, so drift on a shared machine hits every variant
alike: ``/api/chat`` and ``/v1/chat/completions``, each with ``stream`` false and true,
timed by the client (request sent to last byte read, one kept-alive connection).
``/api/chat`` also writes its conversation (two messages) to the catalog; ``/v1`` stores
nothing. Reports medians, p90 and the ratio v1 / api per mode, and the server's own
``overhead_ms`` (turn time outside model calls) medians.

    .venv/bin/python benchmarks/bench_openai_v1.py --rounds 40 --warmup 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.live_server import LiveServer

from ragline.testing.openai_server import scripted_openai_server
from ragline.testing.scripted_llm import citing_model

QUESTION = "How do ROS 2 nodes talk to each other?"
VARIANTS = ["api json", "v1 json", "api stream", "v1 stream"]


def request(variant: str) -> tuple[str, dict[str, Any]]:
    stream = variant.endswith("stream")
    if variant.startswith("api"):
        return "/api/chat", {"message": QUESTION, "collection": "docs", "stream": stream}
    return "/v1/chat/completions", {"model": "ragline/docs", "stream": stream,
                                    "messages": [{"role": "user", "content": QUESTION}]}


def overhead(variant: str, body: bytes) -> float:
    """The server's ``timings.overhead_ms`` from whichever shape the variant answers."""
    text = body.decode()
    if variant == "api json":
        return float(json.loads(text)["timings"]["overhead_ms"])
    if variant == "v1 json":
        return float(json.loads(text)["ragline"]["timings"]["overhead_ms"])
    if variant == "api stream":
        done = text.rsplit("event: done\ndata: ", 1)[1].split("\n", 1)[0]
        return float(json.loads(done)["timings"]["overhead_ms"])
    frames = [x.removeprefix("data: ") for x in text.split("\n\n") if x.startswith("data: {")]
    return float(json.loads(frames[-1])["ragline"]["timings"]["overhead_ms"])


def turn(client: httpx.Client, variant: str) -> tuple[float, float]:
    path, body = request(variant)
    t0 = time.perf_counter()
    with client.stream("POST", path, json=body) as r:
        data = r.read()
    wall = (time.perf_counter() - t0) * 1000
    assert r.status_code == 200, (variant, r.status_code, data[:300])
    return wall, overhead(variant, data)


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--warmup", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-v1-"))
    with scripted_openai_server(citing_model()) as llm_url:
        srv = LiveServer(tmp / "data", env={
            "RAGLINE_AUTH": "on", "RAGLINE_LLM_BASE_URL": llm_url,
            "RAGLINE_LLM_MODEL": "scripted", "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
        try:
            srv.wait_ready()
            key = (tmp / "data" / "admin-key.txt").read_text().strip()
            client = httpx.Client(base_url=srv.url, timeout=60,
                                  headers={"Authorization": f"Bearer {key}"})
            client.post("/collections", json={"name": "docs", "embed": {"provider": "local"}}
                        ).raise_for_status()
            docs = [{"id": f"d{i}", "text": f"Note {i}: ROS 2 nodes exchange messages over "
                     f"topics, services and actions; example {i}.",
                     "metadata": {"title": f"Note {i}", "source_path": f"notes/{i}.md"}}
                    for i in range(20)]
            client.post("/collections/docs/documents", json={"documents": docs}
                        ).raise_for_status()
            wall: dict[str, list[float]] = {v: [] for v in VARIANTS}
            over: dict[str, list[float]] = {v: [] for v in VARIANTS}
            for i in range(args.warmup + args.rounds):
                order = VARIANTS[i % 4:] + VARIANTS[:i % 4]
                for variant in order:
                    w, o = turn(client, variant)
                    if i >= args.warmup:
                        wall[variant].append(w)
                        over[variant].append(o)
            load = os.getloadavg()
        finally:
            srv.stop()
    print(f"{args.rounds} rounds after {args.warmup} warm-up, interleaved; "
          f"load average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
    print(f"{'variant':<12} {'wall median ms':>15} {'wall p90 ms':>12} "
          f"{'server overhead median ms':>26}")
    for v in VARIANTS:
        print(f"{v:<12} {statistics.median(wall[v]):>15.2f} {p90(wall[v]):>12.2f} "
              f"{statistics.median(over[v]):>26.2f}")
    for mode in ("json", "stream"):
        api, v1 = statistics.median(wall[f"api {mode}"]), statistics.median(wall[f"v1 {mode}"])
        print(f"{mode}: v1 / api = {v1 / api:.3f} (v1 - api = {v1 - api:+.2f} ms per turn)")


if __name__ == "__main__":
    main()
