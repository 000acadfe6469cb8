"""Server RSS before, during and after large requests (issue 10: memory back near baseline).

Starts the real server (``ragline serve``) on a fresh data directory, warms it up
(two collections, one small write and one search each, so the model is loaded and
both shards are open), then records the resident set size (``/proc/<pid>/status``:
``VmRSS``, ``RssAnon``, ``RssFile``) as baseline and sends, ``--rounds`` times over:

* a write of pre-computed embeddings close to ``max_request_bytes`` (JSON body);
* a document at ``max_document_chars`` embedded by the local model;
* a search with a query at ``max_query_chars``;
* requests over each limit (refused before work: 413).

RSS is read after every step and once more after a short pause (``settled``). The ratio
``settled / baseline`` is what the issue asks to keep near 1; the peak shows the cost
while a request runs. Finally the server is restarted on the same data directory and
measured after the same warm-up (``fresh_process_same_data``): what holding the data
costs a process that never saw a large request. ``--env NAME=VALUE`` passes settings or
allocator variables (``MALLOC_ARENA_MAX=2``) to the server.

    python benchmarks/bench_memory_large_requests.py --rounds 3 --body-mb 32
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.live_server import LiveServer  # noqa: E402


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    """Resident memory of ``pid`` in MB: ``VmRSS`` (all), ``RssAnon`` (heap, stacks: what
    the process allocated) or ``RssFile`` (mapped files: model weights, store segments;
    page cache the kernel reclaims under pressure)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field}")


def snapshot(pid: int) -> dict[str, float]:
    return {k: round(rss_mb(pid, f), 1) for k, f in
            (("rss", "VmRSS"), ("anon", "RssAnon"), ("file", "RssFile"))}


def warm_up(c: httpx.Client) -> None:
    """The same reads before every baseline: model and store loaded, one search each."""
    c.post("/collections/emb/search", json={"query": "warm"}).raise_for_status()
    c.post("/collections/pre/search", json={"embedding": [0.1] * 384}).raise_for_status()


def big_write(body_mb: int, dim: int = 384) -> bytes:
    """A documents body of about ``body_mb`` MB (JSON), pre-computed embeddings."""
    per_doc = len(json.dumps([0.123456] * dim)) + 200
    n = body_mb * 1024 * 1024 // per_doc
    docs = [{"id": f"b{i}", "text": f"doc {i}", "metadata": {"i": i},
             "embedding": [0.123456 + (i % 7) * 0.01] * dim} for i in range(n)]
    return json.dumps({"documents": docs}).encode()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--body-mb", type=int, default=32)
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="Extra environment for the server (e.g. MALLOC_ARENA_MAX=2).")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ragline-mem-"))
    env = {"RAGLINE_MAX_REQUEST_BYTES": str(64 * 1024 * 1024),
           "RAGLINE_AUTH": "off",  # loopback only
           **dict(e.split("=", 1) for e in args.env)}
    srv = LiveServer(tmp / "data", env=env)
    srv.wait_ready(120)
    pid = srv.proc.pid
    out: dict[str, object] = {}
    try:
        with httpx.Client(base_url=srv.url, timeout=600) as c:
            c.post("/collections", json={"name": "pre"}).raise_for_status()
            c.post("/collections", json={"name": "emb", "embed": {"provider": "local"}})
            c.post("/collections/emb/documents",
                   json={"documents": [{"id": "w", "text": "warm up"}]}).raise_for_status()
            c.post("/collections/pre/documents", json={"documents": [
                {"id": "w", "text": "warm up", "embedding": [0.1] * 384}]}).raise_for_status()
            warm_up(c)
            time.sleep(1)
            base = snapshot(pid)
            body = big_write(args.body_mb)
            peak = base["rss"]
            steps: list[dict[str, object]] = []

            def step(name: str) -> None:
                nonlocal peak
                snap = snapshot(pid)
                peak = max(peak, snap["rss"])
                steps.append({"step": name, **snap})

            for n in range(1, args.rounds + 1):
                r = c.post("/collections/pre/documents", content=body,
                           headers={"content-type": "application/json"})
                assert r.status_code == 200, r.text[:200]
                step(f"{n}: {len(body) // 2**20} MB write")
                r = c.post("/collections/emb/documents", json={"documents": [
                    {"id": "long", "text": "robots sense the world " * 40_000}]})
                assert r.status_code == 200, r.text[:200]
                step(f"{n}: 1M-char document embedded")
                r = c.post("/collections/emb/search", json={"query": "q " * 10_000})
                assert r.status_code == 200, r.text[:200]
                for path, payload in (
                        ("/collections/emb/documents",
                         {"documents": [{"id": "x", "text": "y" * 1_000_001}]}),
                        ("/collections/emb/search", {"query": "q" * 20_001})):
                    assert c.post(path, json=payload).status_code == 413
                step(f"{n}: long query, two 413s")
            time.sleep(3)
            settled = snapshot(pid)
        srv.stop()
        # The same data, a fresh process: what holding it costs without any large request.
        again = LiveServer(tmp / "data", env=env)
        again.wait_ready(120)
        try:
            with httpx.Client(base_url=again.url, timeout=600) as c:
                warm_up(c)
                time.sleep(1)
                fresh = snapshot(again.proc.pid)
        finally:
            again.stop()
        out = {"body_mb": round(len(body) / 1024 / 1024, 1), "rounds": args.rounds,
               "env": args.env, "baseline": base, "peak_rss_mb": round(peak, 1),
               "steps": steps, "settled": settled, "fresh_process_same_data": fresh,
               "settled_over_baseline": round(settled["rss"] / base["rss"], 2),
               "settled_over_fresh_same_data": round(settled["rss"] / fresh["rss"], 2)}
    finally:
        if srv.proc.poll() is None:
            srv.stop()
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
