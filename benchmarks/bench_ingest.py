#!/usr/bin/env python
"""Ingestion benchmark (issue 4) on the RoboLearn Markdown book, with the real local model.

What is measured (medians over ``--reps``):

1. Full ingest of ``<book>/docs`` into a fresh data directory, in process:
   wall time, chunks/s, and where the time goes: inside ``embed()`` and inside
   ``store.upsert`` (which runs in the pipeline's writer thread, overlapped with
   embedding, and on a fresh shard includes Qdrant Edge creating one payload
   index per new metadata field). Share outside the embedder = 1 - embed/wall:
   reading, hashing, parsing, chunking with the model's tokenizer, state
   writes and any store time not hidden behind embedding.
2. An incremental re-run with no change (same process, model loaded): wall
   time and texts embedded (target 0 and < 1 s).
3. Webhook → searchable through the real server (``ragline serve`` in a
   subprocess) and a real local git remote: an author commits a change to one
   lesson and pushes; the timer starts when the signed push webhook is sent and
   stops when ``/search`` returns the new text. Spec 004 Eval-004: < 2 min;
   target < 10 s.
4. Spec 004 Eval-005 over HTTP: ``GET /lesson/{id}`` for every lesson returns
   all its chunks (count equal to the collection's chunks with that
   ``parent_doc_id``) in ``chunk_index`` order 0..n-1.

    .venv/bin/python benchmarks/bench_ingest.py --book /work/shared/data/markdown-book \
        --reps 3 --write

The book is copied to a temporary directory (never into the repo). ``--write``
replaces only the ``## Ingestion (issue 4)`` section of BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.live_server import LiveServer  # noqa: E402

from ragline.facade import Ragline  # noqa: E402
from ragline.settings import Settings  # noqa: E402

SECRET = "bench-secret"
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "Bench", "GIT_AUTHOR_EMAIL": "b@example.com",
           "GIT_COMMITTER_NAME": "Bench", "GIT_COMMITTER_EMAIL": "b@example.com",
           "GIT_CONFIG_GLOBAL": "/dev/null"}
SECTION = "## Ingestion (issue 4)"


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True)


def full_ingest(docs: Path, data: Path) -> tuple[dict[str, Any], Ragline]:
    rl = Ragline(Settings(data_dir=data, _env_file=None)).start()  # type: ignore[call-arg]
    rl.services.embedders.get("local").embed(["warm up"], "query")  # model load is not ingestion
    upsert_s = [0.0]
    real_upsert = rl.services.store.upsert

    def timed_upsert(*args: Any, **kwargs: Any) -> None:
        t = time.perf_counter()
        try:
            real_upsert(*args, **kwargs)
        finally:
            upsert_s[0] += time.perf_counter() - t

    rl.services.store.upsert = timed_upsert  # type: ignore[method-assign]
    t0 = time.perf_counter()
    stats = rl.services.ingest.run_directory("book", rl.tenant, docs, "incremental")
    wall = time.perf_counter() - t0
    rl.services.store.upsert = real_upsert  # type: ignore[method-assign]
    chunks = stats.chunks_created
    return {
        "wall_s": wall, "chunks": chunks, "files": stats.files_seen,
        "texts_embedded": stats.texts_embedded, "embedding_calls": stats.embedding_calls,
        "embed_s": stats.embed_seconds, "upsert_s": upsert_s[0],
        "chunks_per_s": chunks / wall,
        "outside_embedder_share": 1 - stats.embed_seconds / wall,
    }, rl


def noop_rerun(rl: Ragline, docs: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    stats = rl.services.ingest.run_directory("book", rl.tenant, docs, "incremental")
    return {"wall_s": time.perf_counter() - t0, "texts_embedded": stats.texts_embedded,
            "files_skipped": stats.files_skipped}


def sign(body: bytes) -> str:
    return "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()


def wait_job(c: httpx.Client, job_id: str, timeout: float = 900) -> dict[str, Any]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        job: dict[str, Any] = c.get(f"/ingestion/status/{job_id}").json()
        if job["status"] in ("succeeded", "failed"):
            return job
        time.sleep(0.05)
    raise TimeoutError(job_id)


def webhook_runs(work: Path, book: Path, reps: int) -> tuple[list[dict[str, Any]], dict]:
    remote, author, clone = work / "remote.git", work / "author", work / "clone"
    git("init", "--bare", "-b", "main", str(remote), cwd=work)
    shutil.copytree(book, author)
    git("init", "-b", "main", cwd=author)
    git("remote", "add", "origin", str(remote), cwd=author)
    git("add", "-A", cwd=author)
    git("commit", "-m", "book", cwd=author)
    git("push", "origin", "main", cwd=author)
    git("clone", str(remote), str(clone), cwd=work)
    env = {"RAGLINE_GITHUB_WEBHOOK_SECRET": SECRET, "RAGLINE_GITHUB_REPO_PATH": str(clone),
           "RAGLINE_GITHUB_DOCS_PATH": "docs", "RAGLINE_DEFAULT_COLLECTION": "book"}
    server = LiveServer(work / "server-data", env=env)
    runs = []
    try:
        server.wait_ready()
        with httpx.Client(base_url=server.url, timeout=120) as c:
            first = c.post("/ingestion/trigger", json={"path": str(clone / "docs")}).json()
            initial = wait_job(c, first["job_id"])
            assert initial["status"] == "succeeded", initial
            lessons = sorted(p.relative_to(author / "docs").as_posix()
                             for p in (author / "docs").rglob("0*.md"))
            for rep in range(reps):
                rel = lessons[(rep * 7) % len(lessons)]
                token = f"zq{rep}bench{int(time.time())}"
                path = author / "docs" / rel
                path.write_text(path.read_text() + f"\n\n## Update {rep}\n\nThe {token} "
                                "procedure calibrates the arm before each run.\n")
                git("commit", "-am", f"update {rep}", cwd=author)
                git("push", "origin", "main", cwd=author)
                payload = json.dumps({"ref": "refs/heads/main", "forced": False, "commits": [
                    {"id": str(rep), "added": [], "modified": [f"docs/{rel}"],
                     "removed": []}]}).encode()
                t0 = time.perf_counter()
                r = c.post("/ingestion/webhook/github", content=payload, headers={
                    "X-GitHub-Event": "push", "X-Hub-Signature-256": sign(payload),
                    "Content-Type": "application/json"})
                t_ack = time.perf_counter() - t0
                assert r.status_code == 202, r.text
                while True:  # BM25 on the new token: found exactly when it is indexed
                    hits = c.post("/search", json={"query": token, "mode": "sparse",
                                                   "limit": 3}).json()["results"]
                    if any(token in h["text"] for h in hits):
                        break
                    if time.perf_counter() - t0 > 300:
                        raise TimeoutError(f"{token} not searchable after 300 s")
                    time.sleep(0.02)
                t_search = time.perf_counter() - t0
                job = wait_job(c, r.json()["job_id"])
                runs.append({"lesson": rel, "ack_s": t_ack, "searchable_s": t_search,
                             "job_s": job["duration_s"], "files_seen": job["files_seen"],
                             "texts_embedded": job["texts_embedded"],
                             "chunks_created": job["chunks_created"]})
            eval5 = eval_005(c, author / "docs")
    finally:
        server.stop()
    return runs, eval5


def eval_005(c: httpx.Client, docs: Path) -> dict[str, Any]:
    ok = total = 0
    bad: list[str] = []
    for path in sorted(docs.rglob("*.md")):
        sid = path.relative_to(docs).with_suffix("").as_posix()
        total += 1
        lesson = c.get(f"/lesson/{sid}").json()
        where = json.dumps({"parent_doc_id": sid})
        stored = c.get("/collections/book/documents",
                       params={"where": where, "limit": 1000}).json()["total"]
        idx = [ch["chunk_index"] for ch in lesson.get("chunks", [])]
        if lesson.get("total_chunks") == stored == len(idx) and idx == list(range(stored)):
            ok += 1
        else:
            bad.append(sid)
    return {"lessons": total, "complete_and_ordered": ok, "failures": bad[:10]}


def med(rows: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(r[key] for r in rows))


def render(res: dict[str, Any], command: str) -> str:
    f, n, w = res["full"], res["noop"], res["webhook"]
    e5 = res["eval_005"]
    return "\n".join([
        SECTION, "",
        f"Measured {res['date']} on {res['machine']} (load average at start "
        f"{res['load']}), real `local` embedder (all-MiniLM-L6-v2 int8 ONNX, 256 word "
        f"pieces), RoboLearn book `docs/` ({med(f, 'files'):.0f} Markdown files). Medians "
        f"over {len(f)} full runs / {len(n)} no-change runs / {len(w)} webhook pushes.", "",
        "| measurement | result | target |", "|---|---|---|",
        f"| full ingest, wall | {med(f, 'wall_s'):.1f} s for {med(f, 'chunks'):.0f} chunks "
        f"({med(f, 'chunks_per_s'):.1f} chunks/s, {med(f, 'embedding_calls'):.0f} embedding "
        "calls) | spec: 500+ chunks < 5 min |",
        f"| time inside `embed()` | {med(f, 'embed_s'):.1f} s | |",
        f"| time in `store.upsert`, in the writer thread, overlapped with embedding "
        f"(includes Edge creating one payload index per metadata field on the fresh shard) | "
        f"{med(f, 'upsert_s'):.1f} s | |",
        f"| share of wall time outside the embedder (1 - embed / wall) | "
        f"{med(f, 'outside_embedder_share'):.1%} | ≤ 15% |",
        f"| incremental re-run, no change | {med(n, 'wall_s') * 1000:.0f} ms, "
        f"{max(r['texts_embedded'] for r in n)} texts embedded | 0 embeddings, < 1 s |",
        f"| one changed lesson, webhook → searchable (real server, git pull) | "
        f"{med(w, 'searchable_s'):.2f} s (webhook answered in {med(w, 'ack_s'):.2f} s; "
        f"job {med(w, 'job_s'):.2f} s; {max(r['files_seen'] for r in w)} file read, "
        f"{max(r['texts_embedded'] for r in w)} text(s) embedded at most) | "
        "< 10 s (spec < 2 min) |",
        f"| Eval-005: `/lesson/{{id}}` whole and in order | {e5['complete_and_ordered']}/"
        f"{e5['lessons']} lessons | 100% |", "",
        "Notes: store writes run in the pipeline's writer thread while the next group is "
        "embedded (onnxruntime releases the GIL), which keeps Qdrant Edge's ~0.25 s per new "
        "payload index (one per metadata field on a fresh collection) out of the "
        "critical path; before that change the share outside the embedder was 17.6% under "
        "load. \"Searchable\" is checked with a BM25 (`mode: sparse`) query for a unique "
        "token added by the commit; the same token in a default hybrid query with limit 3 "
        "did not surface the chunk in a trial run (a rare word alone ranks low in the dense list). "
        "The no-change re-run reads and hashes all 65 files.", "",
        f"Command: `{command}`", "",
    ])


def write_section(path: Path, section: str) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    lines = text.splitlines(keepends=True)
    start = next((i for i, ln in enumerate(lines) if ln.strip() == SECTION), None)
    if start is None:
        path.write_text(text.rstrip("\n") + "\n\n" + section, encoding="utf-8")
        return
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")),
               len(lines))
    rest = "".join(lines[end:])
    path.write_text("".join(lines[:start]) + section + ("\n" + rest if rest else ""),
                    encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--book", type=Path, default=Path("/work/shared/data/markdown-book"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--noop-reps", type=int, default=5)
    ap.add_argument("--write", action="store_true", help="update BENCHMARKS.md")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    work = Path(tempfile.mkdtemp(prefix="ragline-bench-ingest-"))
    book = work / "book"
    shutil.copytree(args.book, book, ignore=shutil.ignore_patterns(".git"))
    res: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load": f"{os.getloadavg()[0]:.1f}", "full": [], "noop": []}
    try:
        for rep in range(args.reps):
            row, rl = full_ingest(book / "docs", work / f"data-{rep}")
            res["full"].append(row)
            print("full", json.dumps(row), flush=True)
            if rep == args.reps - 1:
                res["noop"] = [noop_rerun(rl, book / "docs") for _ in range(args.noop_reps)]
                print("noop", json.dumps(res["noop"]), flush=True)
            rl.close()
        res["webhook"], res["eval_005"] = webhook_runs(work, book, args.reps)
        print("webhook", json.dumps(res["webhook"]), "eval5", res["eval_005"], flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    command = "python " + " ".join(["benchmarks/bench_ingest.py", *sys.argv[1:]])
    section = render(res, command)
    print(section)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = ROOT / "benchmarks" / "results" / f"ingest_{stamp}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(res, indent=2))
    if args.write:
        write_section(ROOT / "BENCHMARKS.md", section)


if __name__ == "__main__":
    main()
