"""The documentation's code examples, executed.

Every fenced ``python`` or ``bash`` block in README.md and docs/*.md carries one
HTML comment directly above it:

* ``<!-- run-by: tests/FILE.py::test_name -->``: that test runs the block (as
  written, bar the address, the data directory and placeholder paths), or
* ``<!-- not-run: why -->``: it cannot run here (a server of another product, a
  long-running foreground command, the reader's own files); kept rare, see
  :func:`test_not_run_is_rare`.

:func:`test_every_block_is_marked` holds new examples to this, so a doc cannot
gain an example that no test runs without saying why. The blocks that talk to a
server run against a real ``ragline serve`` (auth on); the chat steps against an
OpenAI-compatible endpoint that answers from the scripted model
(``ragline.testing.openai_server``), so ``llm_base_url`` is set exactly as a user sets it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from ragline.testing.openai_server import scripted_openai_server
from ragline.testing.scripted_llm import NO_TOOL, TOOL_DECISION, ScriptedChatModel, citing_model
from tests.live_server import LiveServer

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BOOK = ROOT / "tests" / "fixtures" / "book"
BIN = Path(sys.executable).parent
MARKER = re.compile(r"<!--\s*(run-by|not-run):\s*(.*?)\s*-->")
FENCE = re.compile(r"^```(python|bash)\n(.*?)^```", re.S | re.M)
# At most this share of the blocks may be not-run.
MAX_NOT_RUN = 0.25


@dataclass
class Block:
    doc: Path
    line: int
    lang: str
    code: str
    kind: str | None  # run-by | not-run
    value: str

    def __str__(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks(doc: Path) -> list[Block]:
    text = doc.read_text()
    out = []
    for m in FENCE.finditer(text):
        line = text[:m.start()].count("\n") + 1
        above = [x for x in text[:m.start()].splitlines()[-3:] if x.strip()]
        found = [MARKER.search(x) for x in above if x.strip().startswith("<!--")]
        marks = [f for f in found if f]
        kind, value = (marks[-1].group(1), marks[-1].group(2)) if marks else (None, "")
        out.append(Block(doc, line, m.group(1), m.group(2), kind, value))
    return out


def all_blocks() -> list[Block]:
    return [b for doc in DOCS for b in blocks(doc)]


def runs(doc: str, test: str) -> list[Block]:
    """The blocks of ``doc`` that name ``test`` as their runner, in page order."""
    mine = [b for b in blocks(ROOT / doc)
            if b.kind == "run-by" and b.value.endswith(f"::{test}")]
    assert mine, f"{doc} has no block run by {test}"
    return mine


def sh(code: str, cwd: Path, env: dict[str, str] | None = None,
       timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run a block with bash -euo pipefail; curl fails on HTTP errors (-f)."""
    code = code.replace("curl -", "curl -f -")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=cwd,
                          env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}",
                               **(env or {})},
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{code}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    return done


def json_lines(out: str) -> list[Any]:
    return [json.loads(x) for x in out.replace("}{", "}\n{").splitlines() if x.strip()]


def local_address(code: str, port: int) -> str:
    return code.replace("localhost:8000", f"127.0.0.1:{port}")


def need_model() -> None:
    try:
        from ragline.providers.embedders.local_onnx import LocalOnnxEmbedder

        LocalOnnxEmbedder()
    except Exception as exc:  # the model is built by `make install`
        pytest.skip(f"local embedder not built: {exc}")


# -- the markers ----------------------------------------------------------------------------

def test_every_block_is_marked() -> None:
    found = all_blocks()
    assert len(found) >= 15
    unmarked = [str(b) for b in found if b.kind is None]
    assert not unmarked, f"blocks with neither run-by nor not-run: {unmarked}"
    for b in found:
        if b.kind == "not-run":
            assert len(b.value) >= 15, f"{b}: say why it is not run"
            continue
        path, _, test = b.value.partition("::")
        runner = ROOT / path
        assert runner.is_file() and test, f"{b}: no such runner {b.value}"
        source = runner.read_text()
        assert re.search(rf"^(async )?def {re.escape(test)}\(", source, re.M), \
            f"{b}: {path} has no {test}"
        assert b.doc.name in source, f"{b}: {path} never reads {b.doc.name}"


def test_not_run_is_rare() -> None:
    found = all_blocks()
    skipped = [b for b in found if b.kind == "not-run"]
    assert len(skipped) <= MAX_NOT_RUN * len(found), [str(b) for b in skipped]


# -- getting-started.md, the whole page -----------------------------------------------------

def serve_block_env(code: str, llm_url: str | None = None) -> dict[str, str]:
    """``VAR=value ... make serve`` -> the variables (the LLM address swapped for ours)."""
    line = next(x for x in code.splitlines() if "make serve" in x and not x.startswith("#"))
    env = dict(re.findall(r"(RAGLINE_\w+)=(\S+)", line))
    if llm_url:
        env = {k: re.sub(r"http://localhost:\d+/v1", llm_url, v) for k, v in env.items()}
    return env


@pytest.mark.slow
def test_getting_started(tmp_path: Path) -> None:
    """Install-and-start (config file, then the server as `make serve` starts it), ingest,
    follow the job, search, then restart with an LLM and chat."""
    need_model()
    start, trigger, status, search, chat_start, chat = runs("docs/getting-started.md",
                                                            "test_getting_started")
    page = (ROOT / "docs" / "getting-started.md").read_text()
    shutil.copytree(BOOK, tmp_path / "tests" / "fixtures" / "book")
    # 1. the config file; `make serve` is the server below (tests/test_fresh_clone.py runs
    # the real make serve on a fresh clone)
    sh("\n".join(x for x in start.code.splitlines() if not x.startswith("make serve")),
       tmp_path)
    assert (tmp_path / "ragline.toml").read_text().startswith("ingest_allowed_roots")
    srv = LiveServer(tmp_path / "data", env={"RAGLINE_AUTH": "on"}, cwd=tmp_path)
    try:
        srv.wait_ready()
        key = (tmp_path / "data" / "admin-key.txt").read_text().strip()
        env = {"KEY": key}
        # the banner the page shows: the same labels, in the same order
        shown = re.search(r"\n```\n(ragline \d.*?)```", page, re.S)
        assert shown, "getting-started.md lost its banner"
        labels = re.findall(r"^  ([A-Z]\w+) ", shown.group(1), re.M)
        banner = srv.log.read_text()
        assert labels == [x for x in re.findall(r"^  ([A-Z]\w+) ", banner, re.M) if x in labels]
        # the page shows a terminal; here the output is a log file, which never gets the key
        assert key not in banner and "Config   ragline.toml" in banner
        # 2. ingest (the path comes from $PWD: the config file's allowed root)
        job = json_lines(sh(local_address(trigger.code, srv.port), tmp_path).stdout)[0]
        assert job["collection"] == "book" and job["status"] in ("queued", "running")
        deadline = time.time() + 180
        while True:
            jobs = json_lines(sh(local_address(status.code, srv.port), tmp_path, env).stdout)
            mine = next(j for j in jobs[0]["jobs"] if j["job_id"] == job["job_id"])
            if mine["status"] in ("succeeded", "failed") or time.time() > deadline:
                break
            time.sleep(0.5)
        assert mine["status"] == "succeeded", mine
        # the page's sample output is what the book gives
        claimed = re.search(r'"files_done": (\d+), "files_total": (\d+), "chunks_created": (\d+)',
                            page)
        assert claimed, "getting-started.md lost its sample job status"
        assert (mine["files_done"], mine["files_total"], mine["chunks_created"]) == \
            tuple(int(x) for x in claimed.groups())
        # 3. search
        found = json_lines(sh(local_address(search.code, srv.port), tmp_path, env).stdout)[0]
        assert len(found["results"]) == 3
        assert "ROS 2" in found["results"][0]["text"] or "topic" in found["results"][0]["text"]
        assert found["results"][0]["metadata"]["module"] >= 1
    finally:
        srv.stop()
    # 5. restart with an LLM, then chat
    llm = citing_model()
    with scripted_openai_server(llm) as url:
        srv = LiveServer(tmp_path / "data", env={"RAGLINE_AUTH": "on",
                                                  **serve_block_env(chat_start.code, url)},
                         cwd=tmp_path)
        try:
            srv.wait_ready()
            answer = json_lines(sh(local_address(chat.code, srv.port), tmp_path, env).stdout)[0]
        finally:
            srv.stop()
    assert answer["path"] == "rag"
    titles = [s["title"] for s in answer["sources"]]
    assert titles and answer["answer"] == "Answer from: " + ", ".join(titles)
    assert all(s["collection"] == "book" for s in answer["sources"])
    assert llm.calls and "Lidar sends out pulses of laser light" in llm.calls[-1].prompt


# -- README.md ------------------------------------------------------------------------------

def beir_dataset(root: Path) -> Path:
    (root / "qrels").mkdir(parents=True)
    corpus = [("d1", "Lidar", "lidar sensors measure distance with laser light"),
              ("d2", "Topics", "ros topics publish messages to subscribers")]
    (root / "corpus.jsonl").write_text("".join(
        json.dumps({"_id": i, "title": t, "text": x}) + "\n" for i, t, x in corpus))
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "laser distance"})
                                        + "\n")
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    return root


@pytest.mark.slow
def test_readme_cli(tmp_path: Path) -> None:
    """The shell-on-the-server commands, with the placeholders pointed at real files."""
    need_model()
    pytest.importorskip("pytrec_eval", reason="ragline eval beir needs ragline[eval]")
    (block,) = runs("README.md", "test_readme_cli")
    shutil.copytree(BOOK, tmp_path / "docs")
    beir_dataset(tmp_path / "scifact")
    code = (block.code.replace(".venv/bin/ragline", str(BIN / "ragline"))
            .replace("path/to/docs", str(tmp_path / "docs"))
            .replace("path/to/scifact", str(tmp_path / "scifact")))
    out = sh(code, tmp_path, timeout=600).stdout
    assert re.search(r"^rl_\S+$", out, re.M), out  # the key, printed once
    metrics = json.loads(out.strip().splitlines()[-1])
    assert metrics["queries"] == 1 and metrics["ndcg@10"] == 1.0
    from ragline.facade import Ragline
    from ragline.settings import Settings

    with Ragline(Settings(data_dir=tmp_path / "data", _env_file=None)) as rl:  # type: ignore[call-arg]
        me = rl.owner()
        assert rl.collections.get(me, "book").count > 0
        assert [k.tenant for k in rl.keys.all(me)] == ["alice"]


def checklist_reply() -> str:
    return json.dumps({"title": "High CPU", "steps": [{
        "order": 1, "priority": "high", "action": "Run top", "rationale": "find the busy process",
        "source": "runbooks/cpu.md"}]})


@pytest.mark.slow
def test_readme_and_answers_chat(tmp_path: Path) -> None:
    """README's "Answers" block (chat over SSE, a checklist) and answers.md's prompt
    override, on a server started with the README's LLM variables."""
    need_model()
    (readme,) = runs("README.md", "test_readme_and_answers_chat")
    (override,) = runs("docs/answers.md", "test_readme_and_answers_chat")
    llm = ScriptedChatModel(default=citing_model().default, rules={
        TOOL_DECISION: NO_TOOL, "SRE assistant": checklist_reply()})
    with scripted_openai_server(llm) as url:
        env = serve_block_env(readme.code, url)
        srv = LiveServer(tmp_path / "data", env={"RAGLINE_AUTH": "on", **env})
        try:
            srv.wait_ready()
            key = (tmp_path / "data" / "admin-key.txt").read_text().strip()
            auth = {"authorization": f"Bearer {key}"}
            for name, doc in (("docs", {"id": "a", "text": "ROS 2 topics carry messages "
                                        "between nodes", "metadata": {"title": "Topics"}}),
                              ("runbooks", {"id": "cpu", "text": "High CPU: run top, find the "
                                            "busy process", "metadata": {
                                                "source_path": "runbooks/cpu.md"}})):
                httpx.post(f"{srv.url}/collections", headers=auth, json={
                    "name": name, "embed": {"provider": "local"}}).raise_for_status()
                httpx.post(f"{srv.url}/collections/{name}/documents", headers=auth,
                           json={"documents": [doc]}).raise_for_status()
            shell = {"AUTH": f"Authorization: Bearer {key}"}
            code = "\n".join(x for x in readme.code.splitlines() if "make serve" not in x)
            out = sh(local_address(code, srv.port), tmp_path, shell).stdout
            events = re.findall(r"^event: (\w+)\ndata: (.*)$", out, re.M)
            assert [e for e, _ in events][-1] == "done"
            done = json.loads(events[-1][1])
            assert done["path"] == "rag" and done["sources"][0]["id"] == "a"
            streamed = "".join(json.loads(d)["text"] for e, d in events if e == "token")
            assert streamed == "Answer from: Topics"
            checklist = json.loads(out[out.rindex("\n{") + 1:] if "\n{" in out else out)
            assert checklist["title"] == "High CPU"
            assert checklist["steps"][0]["action"] == "Run top"

            # answers.md: a collection's prompt override, then a question it answers
            sh(local_address(override.code, srv.port), tmp_path, shell)
            meta = httpx.get(f"{srv.url}/collections/docs", headers=auth).json()["metadata"]
            assert "general_knowledge" in meta["prompts"]
            llm.rules["Answer in one sentence"] = "One sentence."
            r = httpx.post(f"{srv.url}/api/chat", headers=auth, json={
                "message": "what is the speed of light?", "collection": "docs",
                "stream": False}, timeout=60)
            assert r.json()["path"] == "general" and r.json()["answer"] == "One sentence."
            assert llm.calls[-1].prompt.startswith("You are ragline. Answer in one sentence: ")
        finally:
            srv.stop()


# -- evaluation.md, ingestion.md, operations.md --------------------------------------------

@pytest.mark.slow
def test_evaluation_questions(tmp_path: Path) -> None:
    """Ingest the book and score the shipped question file, from the repository root."""
    need_model()
    (block,) = runs("docs/evaluation.md", "test_evaluation_questions")
    code = (block.code.replace("/tmp/eval", str(tmp_path / "eval"))
            .replace("--output run1.json", f"--output {tmp_path / 'run1.json'}"))
    sh(code, ROOT, timeout=600)
    report = json.loads((tmp_path / "run1.json").read_text())
    text = json.dumps(report)
    assert "hit@1" in text or "hit1" in text or "mrr" in text, text[:500]


def test_evaluation_judged_questions(tmp_path: Path) -> None:
    """The judged fixture book: graded relevance gives nDCG@5 and useful@5 (issue 36)."""
    need_model()
    (block,) = runs("docs/evaluation.md", "test_evaluation_judged_questions")
    code = (block.code.replace("/tmp/judged", str(tmp_path / "judged"))
            .replace("--output judged.json", f"--output {tmp_path / 'judged.json'}"))
    sh(code, ROOT, timeout=600)
    metrics = json.loads((tmp_path / "judged.json").read_text())["metrics"]
    assert metrics["questions"] == 3 and metrics["hit@5"] == 1.0
    assert 0 < metrics["ndcg@5"] <= 1 and 0 < metrics["useful@5"] <= 1


def test_ingestion_building_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/ingestion.md's first example, verbatim from the repository root: discover,
    load, chunk, ids."""
    (first,) = runs("docs/ingestion.md", "test_ingestion_building_blocks")
    monkeypatch.chdir(ROOT)
    ns: dict[str, Any] = {}
    exec(compile(first.code, "docs/ingestion.md", "exec"), ns)
    assert ns["chunks"] and len(ns["ids"]) == len(ns["chunks"])
    assert ns["doc"].metadata["proficiency_level"]  # a frontmatter value or the default


@pytest.mark.slow
def test_ingestion_facade(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/ingestion.md's `rl.ingestion.submit` example: a directory, an upload, text and a URL."""
    need_model()
    from ragline.facade import Ragline
    from ragline.settings import Settings
    from ragline.testing.server import serve_handler, static_page

    (block,) = runs("docs/ingestion.md", "test_ingestion_facade")
    page = b"<html><head><title>A page</title></head><body><p>Rovers climb dunes.</p></body>"

    shutil.copytree(BOOK, tmp_path / "book")
    fpdf = pytest.importorskip("fpdf", reason="fpdf2 (ragline[dev]) writes the sample PDF")
    pdf = fpdf.FPDF()
    pdf.add_page()
    pdf.set_font("helvetica", size=12)
    pdf.cell(text="Field notes: the rover climbs slowly over dunes.")
    (tmp_path / "notes.pdf").write_bytes(bytes(pdf.output()))
    monkeypatch.chdir(tmp_path)  # the example's ./data and ./notes.pdf
    # the URL is a local test page, which only allow_private_urls lets it fetch
    monkeypatch.setenv("RAGLINE_ALLOW_PRIVATE_URLS", "true")
    ns: dict[str, Any] = {}  # nothing injected: the example names everything it uses
    with serve_handler(static_page(page, "text/html")) as site:
        code = (block.code.replace("/srv/book/docs", str(tmp_path / "book"))
                .replace("https://example.com/a", f"{site}/a"))
        exec(compile(code, "docs/ingestion.md", "exec"), ns)
    settings = Settings(data_dir=tmp_path / "data", _env_file=None)  # type: ignore[call-arg]
    assert ns["job"].status == "succeeded" and ns["job"].collection == "book"
    with Ragline(settings) as rl:
        assert rl.collections.get(rl.owner(), "book").count > 0
        assert rl.collections.get(rl.owner(), "knowledge").count >= 1


@pytest.mark.slow
def test_operations_backup_restore(tmp_path: Path) -> None:
    """docs/operations.md's backup and restore, with no server running, then verify."""
    need_model()
    from ragline.facade import DocumentInput, Ragline
    from ragline.settings import Settings

    block, verify = runs("docs/operations.md", "test_operations_backup_restore")
    with Ragline(Settings(data_dir=tmp_path / "data", _env_file=None)) as rl:  # type: ignore[call-arg]
        me = rl.owner()
        rl.collections.create(me, "notes", embed={"provider": "local"})
        rl.documents.add(me, "notes", [DocumentInput("kept across a restore", {}, None, "n1")])
    code = (block.code.replace("/backups/", f"{tmp_path}/backups/")
            .replace("/srv/ragline/data", str(tmp_path / "restored" / "data")))
    sh(code, tmp_path)
    with Ragline(Settings(data_dir=tmp_path / "restored" / "data",  # type: ignore[call-arg]
                          _env_file=None)) as rl:
        page = rl.documents.page(rl.owner(), "notes")
        assert [r.id for r in page.records] == ["n1"]
    # then the consistency check of the same page, on the restored directory: clean
    out = sh(verify.code.replace("/srv/ragline/data", str(tmp_path / "restored" / "data")),
             tmp_path).stdout
    assert out.count("consistent") == 2 and "left" not in out, out  # exit 0 both times


# -- configuration examples -----------------------------------------------------------------

CONFIG_DOCS = ("docs/client.md", "docs/reranking.md", "docs/scaling.md")


def test_configuration_blocks_are_valid_settings(tmp_path: Path) -> None:
    """The blocks that configure a provider by environment and start ``ragline serve``
    (a remote ragline store or reranker, the PostgreSQL catalog and pgvector store) need
    servers this test cannot reach; what they can get wrong — a setting's name, its JSON,
    a provider name — is checked by running them with ``ragline config show --json`` in
    place of ``ragline serve``: the settings load, carry the block's values, and no
    credential of the block shows."""
    found = [b for doc in CONFIG_DOCS
             for b in runs(doc, "test_configuration_blocks_are_valid_settings")]
    assert len(found) >= 3
    for block in found:
        code = block.code.rstrip()
        assert code.endswith("ragline serve"), block
        done = sh(code[: -len("ragline serve")] + "ragline config show --json", tmp_path)
        settings = json.loads(done.stdout)["settings"]
        for name, value in re.findall(r"RAGLINE_([A-Z_]+)=('[^']*'|\S+)", code):
            got = settings[name.lower()]
            if value.startswith("'"):  # JSON options: every key given is there
                assert set(json.loads(value[1:-1])) <= set(got), (str(block), name, got)
            else:
                assert got == value, (str(block), name, got)
        for secret in re.findall(r'"(?:api_key|dsn)": "([^"]+)"', code):
            assert secret not in done.stdout, (str(block), "a credential shows")
