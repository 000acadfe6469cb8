"""Model catalogues the CLI shows (kept apart from providers so the CLI imports no provider).

The recommended cross-encoders live with the reranker provider; this module is
the facade-level door to them for ``ragline serve --help`` and
``--list-reranker-models``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

GENERIC_HELP = "Cross-encoder model (Hugging Face name or cached id) for /rerank."


def reranker_help() -> str:
    try:
        from ragline.providers.rerankers.catalog import help_text
    except ImportError:  # the rerank extra is not installed
        return GENERIC_HELP
    return help_text()


def build_reranker(name_or_path: str, models_dir: Path | None = None, *,
                   out: Path | None = None, force: bool = False, quantize: bool = True) -> Any:
    """``ragline models build-reranker``: export a cross-encoder to ONNX once (needs torch).

    Returns :class:`~ragline.providers.rerankers.onnx_export.BuildResult`.
    """
    from ragline.providers.embedders.local_onnx import models_dir as default_models_dir
    from ragline.providers.rerankers.onnx_export import build_reranker as build

    return build(name_or_path, default_models_dir(models_dir), out=out, force=force,
                 quantize=quantize)


def reranker_list() -> str:
    from ragline.providers.rerankers.catalog import render_list

    return render_list()
