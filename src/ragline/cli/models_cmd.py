"""``ragline models``: build local models once, so the server runs without torch.

``build-reranker`` needs the build tools ``make install`` puts in the venv
(torch, transformers); the server then serves the result with onnxruntime.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from ragline.settings import hub_offline

models_app = typer.Typer(help="Build local models (ONNX) once.", no_args_is_help=True)


@models_app.command("build-reranker")
def build_reranker(
    name_or_path: Annotated[str, typer.Argument(
        help="Cross-encoder directory, or a hub name already in the local cache.")],
    models_dir: Annotated[Path | None, typer.Option(
        help="Models directory (default: settings.models_dir, $RAGLINE_MODELS_DIR or "
        "<venv>/share/ragline/models).")] = None,
    out: Annotated[Path | None, typer.Option(
        help="Exact output directory (default: <models-dir>/<name>-onnx-int8).")] = None,
    force: Annotated[bool, typer.Option(help="Rebuild even if already built.")] = False,
    fp32: Annotated[bool, typer.Option(help="Keep the fused fp32 graph (no int8).")] = False,
) -> None:
    """Export a cross-encoder to int8 ONNX (the embedder's recipe) into the models dir.

    Serve it with `ragline serve --cross-encoder NAME_OR_PATH` (the same
    argument) or `--cross-encoder-path <output dir>`: no torch at run time.
    """
    from ragline.cli.main import build_settings
    from ragline.errors import RaglineError
    from ragline.models import build_reranker as build

    hub_offline()
    console = Console(stderr=True)
    try:
        result = build(name_or_path, models_dir or build_settings().models_dir, out=out,
                       force=force, quantize=not fp32)
    except RaglineError as exc:
        console.print(f"[red]error:[/red] {exc.message}")
        raise typer.Exit(1) from exc
    if result.skipped:
        console.print(f"{result.path} is already built (use --force to rebuild)")
    else:
        kind = "int8" if result.quantized else "fp32"
        console.print(f"built {result.path} ({kind}, {result.size_mb:.1f} MB) in "
                      f"{result.seconds:.1f}s; agreement with torch: {result.agreement}")
    typer.echo(str(result.path))
