"""``ragline eval beir``: retrieval quality on a BEIR dataset."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

eval_app = typer.Typer(help="Measure retrieval quality.", no_args_is_help=True)


@eval_app.command("beir")
def beir(
    path: Annotated[Path, typer.Argument(help="BEIR dataset folder (corpus.jsonl, ...).")],
    collection: Annotated[str, typer.Option(help="Collection to load it into.")],
    mode: Annotated[str | None, typer.Option(help="dense, sparse or hybrid.")] = None,
    provider: Annotated[str, typer.Option(help="Embedding provider for a new collection.")]
    = "local",
    data_dir: Annotated[Path | None, typer.Option(help="Data directory.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print metrics as JSON last.")] = False,
) -> None:
    """Ingest PATH (once) and report nDCG@10, Recall@100 and MRR@10."""
    from ragline.cli.main import build_settings
    from ragline.evaluation import beir as b
    from ragline.facade import Ragline

    if mode not in (None, "dense", "sparse", "hybrid"):
        raise typer.BadParameter("mode must be dense, sparse or hybrid")
    console = Console(stderr=True)
    rl = Ragline(build_settings(data_dir)).start()
    try:
        data = b.load(path)
        columns = (TextColumn("ingest"), BarColumn(),
                   TextColumn("{task.completed}/{task.total}"), TimeRemainingColumn())
        with Progress(*columns, console=console) as bar:
            task = bar.add_task("ingest", total=len(data.corpus))
            t0 = time.perf_counter()
            loaded = b.ingest(rl, data, collection, provider,
                              lambda done, total: bar.update(task, completed=done))
        if loaded:
            console.print(f"ingested {len(data.corpus)} documents in "
                          f"{time.perf_counter() - t0:.1f}s")
        else:
            console.print(f"collection '{collection}' already holds the corpus; not re-ingested")
        t1 = time.perf_counter()
        metrics = b.score(data, b.run(rl, data, collection, mode))
        elapsed = time.perf_counter() - t1
        console.print(f"{metrics['queries']} queries in {elapsed:.1f}s "
                      f"(mode={mode or 'auto'})")
        for k in ("ndcg@10", "recall@100", "mrr@10"):
            console.print(f"  {k:>10}: {metrics[k]:.4f}")
        if as_json:
            typer.echo(json.dumps(metrics))
    finally:
        rl.close()
