"""``ragline eval beir`` (a BEIR dataset) and ``ragline eval questions`` (your own questions)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from ragline.cli.common import client_command
from ragline.cli.target import Target

eval_app = typer.Typer(help="Measure retrieval quality.", no_args_is_help=True)

Overviews = Annotated[str | None, typer.Option(
    help="yield or keep: the overview prior (default: the server's setting).")]
Mmr = Annotated[float | None, typer.Option(
    help="MMR weight of relevance against novelty, 0-1 (default: off).")]
GroupBy = Annotated[str | None, typer.Option(
    help="Distinct results per 'source' or metadata field (default: off).")]


@eval_app.command("beir")
@client_command
def beir(
    path: Annotated[Path, typer.Argument(help="BEIR dataset folder (corpus.jsonl, ...).")],
    target: Target, as_json: bool,
    collection: Annotated[str, typer.Option(help="Collection to load it into.")],
    mode: Annotated[str | None, typer.Option(help="dense, sparse or hybrid.")] = None,
    provider: Annotated[str, typer.Option(help="Embedding provider for a new collection.")]
    = "local",
    overviews: Overviews = None,
    mmr: Mmr = None,
    group_by: GroupBy = None,
) -> None:
    """Ingest PATH (once) and report nDCG@10, Recall@100 and MRR@10 (on a server, or the
    data directory when none runs; --json prints the metrics last)."""
    from ragline.evaluation import beir as b

    if mode not in (None, "dense", "sparse", "hybrid"):
        raise typer.BadParameter("mode must be dense, sparse or hybrid")
    console = Console(stderr=True)
    data = b.load(path)
    columns = (TextColumn("ingest"), BarColumn(),
               TextColumn("{task.completed}/{task.total}"), TimeRemainingColumn())
    with Progress(*columns, console=console) as bar:
        task = bar.add_task("ingest", total=len(data.corpus))
        t0 = time.perf_counter()
        loaded = b.ingest(target, data, collection, provider,
                          lambda done, total: bar.update(task, completed=done))
    if loaded:
        console.print(f"ingested {len(data.corpus)} documents in "
                      f"{time.perf_counter() - t0:.1f}s")
    else:
        console.print(f"collection '{collection}' already holds the corpus; not re-ingested")
    t1 = time.perf_counter()
    metrics = b.score(data, b.run(target, data, collection, mode,
                                  options=_search_options(overviews, mmr, group_by)))
    elapsed = time.perf_counter() - t1
    console.print(f"{metrics['queries']} queries in {elapsed:.1f}s "
                  f"(mode={mode or 'auto'})")
    for k in ("ndcg@10", "recall@100", "mrr@10"):
        console.print(f"  {k:>10}: {metrics[k]:.4f}")
    if as_json:
        typer.echo(json.dumps(metrics))


def _search_options(overviews: str | None, mmr: float | None,
                    group_by: str | None) -> dict[str, Any]:
    """The result-shaping options of ``SearchRequest`` the eval commands expose."""
    if overviews not in (None, "yield", "keep"):
        raise typer.BadParameter("--overviews must be yield or keep")
    if mmr is not None and not 0.0 <= mmr <= 1.0:
        raise typer.BadParameter("--mmr must be between 0 and 1")
    out: dict[str, Any] = {"overviews": overviews, "mmr": mmr, "group_by": group_by}
    return {k: v for k, v in out.items() if v is not None}


@eval_app.command("questions")
@client_command
def questions(
    path: Annotated[Path, typer.Argument(help="Questions file: .jsonl, .yaml/.yml or .json.")],
    target: Target, as_json: bool,
    collection: Annotated[str, typer.Option(help="Collection to search (already ingested).")],
    mode: Annotated[str | None, typer.Option(help="dense, sparse or hybrid.")] = None,
    k: Annotated[list[int] | None, typer.Option(
        "--k", help="Cut-offs for hit@k (repeat; default 1 3 5).")] = None,
    depth: Annotated[int, typer.Option(help="Results fetched per question (ranks beyond "
                                       "it count as not found).")] = 50,
    where: Annotated[str | None, typer.Option(
        help='Filter for every question, as JSON: \'{"hardware_tier": {"$lte": 1}}\'.')] = None,
    baseline: Annotated[Path | None, typer.Option(
        help="A previous run's --json report: list what changed.")] = None,
    output: Annotated[Path | None, typer.Option(
        help="Also write the JSON report to this file.")] = None,
    min_hit1: Annotated[float | None, typer.Option(help="Fail (exit 1) below this hit@1.")]
    = None,
    min_hit3: Annotated[float | None, typer.Option(help="Fail below this hit@3.")] = None,
    min_hit5: Annotated[float | None, typer.Option(help="Fail below this hit@5.")] = None,
    min_mrr: Annotated[float | None, typer.Option(help="Fail below this MRR.")] = None,
    max_regressions: Annotated[int | None, typer.Option(
        help="Fail when more questions than this rank worse than in --baseline.")] = None,
    overviews: Overviews = None,
    mmr: Mmr = None,
    group_by: GroupBy = None,
) -> None:
    """Search each question and report hit@1/3/5, MRR, nDCG@5, useful@5 (share of the top
    5 graded useful) and every question's rank (on a server, or the data directory when
    none runs).

    Exit code 1 when a --min-* threshold (or --max-regressions) is missed, 2 for bad
    input, 3 for an unknown collection: put retrieval regressions in CI.
    """
    from ragline.errors import RaglineError
    from ragline.evaluation import questions as ev

    if mode not in (None, "dense", "sparse", "hybrid"):
        raise typer.BadParameter("mode must be dense, sparse or hybrid")
    ks = sorted(set(k or ev.DEFAULT_KS))
    if any(x < 1 for x in ks):
        raise typer.BadParameter("--k must be at least 1")
    console = Console(stderr=True)
    try:
        qs = ev.load_questions(path)
        filt = json.loads(where) if where else None
        prev = ev.load_baseline(baseline) if baseline else None
    except json.JSONDecodeError as exc:
        console.print(f"[red]error:[/red] --where is not JSON ({exc.msg})")
        raise typer.Exit(2) from exc
    except RaglineError as exc:
        console.print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(2) from exc
    t0 = time.perf_counter()
    report = ev.evaluate(_searcher(target), qs, collection, mode, ks=ks, depth=depth,
                         where=filt, options=_search_options(overviews, mmr, group_by))
    elapsed = time.perf_counter() - t0
    _print_report(console, report, elapsed)
    payload = report.to_json()
    failures: list[str] = []
    if prev is not None:
        changes = ev.diff(report, prev)
        _print_diff(console, changes)
        payload["diff"] = changes.to_json()
        if max_regressions is not None and len(changes.regressed) > max_regressions:
            failures.append(f"{len(changes.regressed)} questions rank worse than in the "
                            f"baseline (at most {max_regressions} allowed)")
    minimums = {name: value for name, value in
                (("hit@1", min_hit1), ("hit@3", min_hit3), ("hit@5", min_hit5),
                 ("mrr", min_mrr)) if value is not None}
    failures += ev.check_thresholds(report.metrics, minimums)
    finish_report(console, payload, failures, output, as_json)


def finish_report(console: Any, payload: dict[str, Any], failures: list[str],
                  output: Path | None, as_json: bool) -> None:
    """The end every eval command shares: the failures in the payload, the JSON file
    (``--output``), the missed thresholds printed, ``--json`` echoed, exit 1 on a miss."""
    payload["failures"] = failures
    if output is not None:
        output.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n",
                          encoding="utf-8")
    for failure in failures:
        console.print(f"[red]threshold missed:[/red] {failure}")
    if as_json:
        typer.echo(json.dumps(payload, ensure_ascii=False))
    if failures:
        raise typer.Exit(1)


def _searcher(target: Target) -> Any:
    def search(question: str, collection: str, mode: str | None, where: dict[str, Any] | None,
               limit: int, options: dict[str, Any]) -> list[tuple[str, Any]]:
        res = target.search(collection, question, limit=limit, mode=mode, where=where,
                            **options)
        return [(h.id, h.metadata) for h in res.results]
    return search


def _rank(value: int | None) -> str:
    return "-" if value is None else str(value)


def _print_report(console: Console, report: Any, elapsed: float) -> None:
    from ragline.cli.common import fitted

    console.print(fitted(f"{report.metrics['questions']} questions on "
                         f"{report.config['collection']} (mode={report.config['mode']}) "
                         f"in {elapsed:.1f}s",
                         ["id", "rank", "source rank", "useful", "question", "top source"],
                         [(q.id, _rank(q.rank), _rank(q.source_rank),
                           f"{sum(g >= 1 for g in q.grades)}/{len(q.grades)}",
                           q.question[:60], q.top[0] if q.top else "")
                          for q in report.questions],
                         console.width))
    for name, value in report.metrics.items():
        console.print(f"  {name:>14}: {value:.4f}" if isinstance(value, float)
                      else f"  {name:>14}: {value}")


def _print_diff(console: Console, changes: Any) -> None:
    for name, (before, after) in changes.metrics.items():
        if before != after:
            console.print(f"  {name:>14}: {before:.4f} -> {after:.4f} ({after - before:+.4f})")
    for label, items in (("regressed", changes.regressed), ("improved", changes.improved)):
        for c in items:
            console.print(f"  {label}: {c.id} rank {_rank(c.before)} -> {_rank(c.after)}  "
                          f"{c.question[:60]}")
    if changes.added or changes.removed:
        console.print(f"  questions added: {len(changes.added)}, removed: {len(changes.removed)}")
