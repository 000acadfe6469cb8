"""Server RSS before, during and after large requests (issue 10: memory back near baseline).

Starts the real server (``ragline serve``) on a fresh data directory, warms it up
(a collection, one small write, one search, so the model and the store are loaded),
then records the resident set size (``/proc/<pid>/status`` VmRSS) as baseline and
sends, ``--rounds`` times over:

* a write of pre-computed embeddings close to ``max_request_bytes`` (JSON body);
* a document at ``max_document_chars`` embedded by the local model;
* a search with a query at ``max_query_chars``;
* requests over each limit (refused before work: 413).

RSS is read after every round and once more after a short pause. The ratio
``after / baseline`` is what the issue asks to keep near 1; the peak shows the
cost while a request runs.

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


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


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
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ragline-mem-"))
    srv = LiveServer(tmp / "data", env={"RAGLINE_MAX_REQUEST_BYTES": str(64 * 1024 * 1024),
                                        "RAGLINE_AUTH": "off"})  # loopback only
    srv.wait_ready(120)
    pid = srv.proc.pid
    out: dict[str, object] = {}
    try:
        with httpx.Client(base_url=srv.url, timeout=600) as c:
            c.post("/collections", json={"name": "pre"}).raise_for_status()
            c.post("/collections", json={"name": "emb", "embed": {"provider": "local"}})
            c.post("/collections/emb/documents",
                   json={"documents": [{"id": "w", "text": "warm up"}]}).raise_for_status()
            c.post("/collections/emb/search", json={"query": "warm"}).raise_for_status()
            time.sleep(1)
            base = rss_mb(pid)
            body = big_write(args.body_mb)
            peak, after = base, []
            for _ in range(args.rounds):
                r = c.post("/collections/pre/documents", content=body,
                           headers={"content-type": "application/json"})
                assert r.status_code == 200, r.text[:200]
                peak = max(peak, rss_mb(pid))
                r = c.post("/collections/emb/documents", json={"documents": [
                    {"id": "long", "text": "robots sense the world " * 40_000}]})
                assert r.status_code == 200, r.text[:200]
                peak = max(peak, rss_mb(pid))
                r = c.post("/collections/emb/search", json={"query": "q " * 10_000})
                assert r.status_code == 200, r.text[:200]
                for path, payload in (
                        ("/collections/emb/documents",
                         {"documents": [{"id": "x", "text": "y" * 1_000_001}]}),
                        ("/collections/emb/search", {"query": "q" * 20_001})):
                    assert c.post(path, json=payload).status_code == 413
                after.append(round(rss_mb(pid), 1))
            time.sleep(3)
            settled = rss_mb(pid)
            out = {"body_mb": round(len(body) / 1024 / 1024, 1), "rounds": args.rounds,
                   "baseline_mb": round(base, 1), "peak_mb": round(peak, 1),
                   "after_each_round_mb": after, "settled_mb": round(settled, 1),
                   "settled_over_baseline": round(settled / base, 2)}
    finally:
        srv.stop()
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
