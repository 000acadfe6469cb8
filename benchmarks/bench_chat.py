#!/usr/bin/env python
"""Chat-turn benchmark (issue 11): time to first token, total time, and what ragline adds.

Setup: llama.cpp's server (llama-cpp-python, ``make test-llm``'s venv) with
SmolLM2-135M-Instruct Q4_1, 2 threads, ``n_ctx`` 2048; a ragline instance with the local
embedder and a 20-document collection; ``llm_max_tokens`` 32 per call.

Timed per turn (``--turns``, after ``--warmup`` untimed turns), first messages of new
conversations (no topic-update call), driven through the facade (no HTTP):

* ``first_token_ms``: from the start of the turn to the first streamed token;
* ``total_ms``: the whole turn, answer stored;
* ``llm_ms``: time inside the two model calls (tool decision, streamed answer);
* ``overhead_ms`` = total - llm: retrieval (query embedding + hybrid search), prompt
  building, JSON parsing, the catalog writes. Target: median < 50 ms.

Baseline in the same run, interleaved turn by turn: the model alone, i.e. the same two
calls (the turn's tool-decision prompt, then its final prompt streamed) sent straight
through the provider, with no retrieval or storage.

Usage: RAGLINE_LLAMA_PYTHON=.venv-llm/bin/python .venv/bin/python benchmarks/bench_chat.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from ragline.facade import DocumentInput, Ragline
from ragline.providers.llms.openai_compat import OpenAIChatModel
from ragline.services.answers.chat import DECISION_MAX_TOKENS
from ragline.settings import Settings
from ragline.testing.llama_server import MODEL_ALIAS, llama_server

FACTS = [f"Fact {i}: the {w} system stores its settings in {w}.conf and restarts nightly."
         for i, w in enumerate(["alpha", "bravo", "charlie", "delta", "echo", "foxtrot",
                                "golf", "hotel", "india", "juliet", "kilo", "lima", "mike",
                                "november", "oscar", "papa", "quebec", "romeo", "sierra",
                                "tango"])]
QUESTIONS = [f"Where does the {w} system keep its settings?"
             for w in ["alpha", "bravo", "charlie", "delta", "echo", "golf", "kilo", "mike",
                       "oscar", "romeo", "tango", "lima"]]


def med(xs: list[float]) -> float:
    return round(statistics.median(xs), 1)


async def run(rl: Ragline, baseline: OpenAIChatModel, turns: int, warmup: int
              ) -> dict[str, Any]:
    rows: list[dict[str, float]] = []
    base: list[dict[str, float]] = []
    for i in range(warmup + turns):
        q = QUESTIONS[i % len(QUESTIONS)]
        turn = await rl.answers.chat_turn(rl.owner(), q, collection="kb")
        async for _ in turn.events():
            pass
        if i < warmup:
            continue
        rows.append({k: turn.timings[k] for k in
                     ("first_token_ms", "total_ms", "llm_ms", "overhead_ms", "retrieval_ms")})
        # baseline: the same two model calls, nothing else
        t0 = time.perf_counter()
        await baseline.complete([{"role": "user", "content": turn.decision_prompt}],
                                json_mode=True, max_tokens=DECISION_MAX_TOKENS)
        first = None
        async for _ in baseline.stream([{"role": "user", "content": turn.prompt}]):
            if first is None:
                first = (time.perf_counter() - t0) * 1000
        base.append({"first_token_ms": first or 0.0,
                     "total_ms": (time.perf_counter() - t0) * 1000})
        print(json.dumps({"turn": rows[-1], "baseline": base[-1]}), flush=True)
    out = {k: med([r[k] for r in rows]) for k in rows[0]}
    out["baseline_first_token_ms"] = med([b["first_token_ms"] for b in base])
    out["baseline_total_ms"] = med([b["total_ms"] for b in base])
    out["overhead_p90_ms"] = round(sorted(r["overhead_ms"] for r in rows)[
        int(0.9 * (len(rows) - 1))], 1)
    out["turns"] = turns
    out["ratio_total_vs_baseline"] = round(out["total_ms"] / out["baseline_total_ms"], 2)
    return out


def scripted(turns: int, warmup: int) -> dict[str, Any]:
    from ragline.testing.scripted_llm import ScriptedChatModel

    answer = "The settings live in a .conf file named after the system."
    llm = ScriptedChatModel(rules={"Respond ONLY with a JSON": '{"tool_name": "none"}'},
                            default=answer)
    with tempfile.TemporaryDirectory() as tmp:
        rl = Ragline(Settings(data_dir=Path(tmp) / "data", _env_file=None),  # type: ignore[call-arg]
                     llm=llm).start()
        rl.collections.create(rl.owner(), "kb", embed={"provider": "local"})
        rl.documents.add(rl.owner(), "kb", [DocumentInput(t, {"title": f"fact {i}"})
                                            for i, t in enumerate(FACTS)])

        async def go() -> list[dict[str, float]]:
            rows = []
            for i in range(warmup + turns):
                turn = await rl.answers.chat_turn(rl.owner(),
                                                  QUESTIONS[i % len(QUESTIONS)] + f" #{i}",
                                          collection="kb")
                async for _ in turn.events():
                    pass
                if i >= warmup:
                    rows.append(turn.timings)
            return rows

        rows = asyncio.run(go())
        rl.close()
    keys = ("total_ms", "overhead_ms", "retrieval_ms", "first_token_ms")
    return {"model": "scripted (0 ms)", "turns": turns,
            **{k: med([r[k] for r in rows]) for k in keys}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--scripted", action="store_true", help="no server: the scripted test "
                    "model answers instantly, so the figures are ragline's own cost")
    args = ap.parse_args()
    if args.scripted:
        print(json.dumps(scripted(args.turns, args.warmup), indent=2))
        return
    python = os.environ.get("RAGLINE_LLAMA_PYTHON", ".venv-llm/bin/python")
    with llama_server(python) as url, tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp) / "data", llm_base_url=url,  # type: ignore[call-arg]
                            llm_model=MODEL_ALIAS, llm_max_tokens=args.max_tokens,
                            _env_file=None)
        rl = Ragline(settings).start()
        rl.collections.create(rl.owner(), "kb", embed={"provider": "local"})
        rl.documents.add(rl.owner(), "kb", [DocumentInput(t, {"title": f"fact {i}",
                                                              "source_path": f"facts/{i}.md"})
                                            for i, t in enumerate(FACTS)])
        baseline = OpenAIChatModel(base_url=url, model=MODEL_ALIAS, max_tokens=args.max_tokens)
        result = asyncio.run(run(rl, baseline, args.turns, args.warmup))
        rl.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
