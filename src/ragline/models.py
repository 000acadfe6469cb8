"""Model catalogues the CLI shows (kept apart from providers so the CLI imports no provider).

The recommended cross-encoders live with the reranker provider; this module is
the facade-level door to them for ``ragline serve --help`` and
``--list-reranker-models``.
"""

from __future__ import annotations

GENERIC_HELP = "Cross-encoder model (Hugging Face name or cached id) for /rerank."


def reranker_help() -> str:
    try:
        from ragline.providers.rerankers.catalog import help_text
    except ImportError:  # the rerank extra is not installed
        return GENERIC_HELP
    return help_text()


def reranker_list() -> str:
    from ragline.providers.rerankers.catalog import render_list

    return render_list()
