"""Curated cross-encoder models, for ``--cross-encoder`` help and ``--list-reranker-models``.

Spec 000 asks that people can discover a sensible model without reading papers:
the help text shows one example per use case and the list command shows the
whole table. The list is advice, not a whitelist: any Hugging Face model that
``sentence_transformers.CrossEncoder`` can load works, so nothing here is used
to validate a name.

Sizes are the fp32 weights on disk. Latencies are rough CPU figures for scoring
10 query/document pairs of about 100 words each on a few cores; they are for
comparing models with each other, not promises (see BENCHMARKS.md for what was
measured on this project's own hardware).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

UseCase = Literal["fast", "recommended", "high-accuracy"]

USE_CASES: tuple[UseCase, ...] = ("fast", "recommended", "high-accuracy")
HUB_LINK = "https://huggingface.co/models?pipeline_tag=text-ranking"

_USE_CASE_TITLES: dict[UseCase, str] = {
    "fast": "Fast (small, low latency, good for CPU)",
    "recommended": "Recommended (best balance of speed and accuracy)",
    "high-accuracy": "High accuracy (large, slower; a GPU helps)",
}


@dataclass(frozen=True)
class RerankerModel:
    """One curated model: what a person needs to choose between them."""

    name: str
    size: str
    latency_10_docs: str
    accuracy: str
    use_case: UseCase
    notes: str = ""


MODELS: tuple[RerankerModel, ...] = (
    RerankerModel(
        name="cross-encoder/ms-marco-TinyBERT-L-2-v2",
        size="17 MB",
        latency_10_docs="~10 ms",
        accuracy="good (MS MARCO MRR@10 ≈ 0.33)",
        use_case="fast",
        notes="English; 2 layers",
    ),
    RerankerModel(
        name="mixedbread-ai/mxbai-rerank-xsmall-v1",
        size="280 MB",
        latency_10_docs="~60 ms",
        accuracy="good",
        use_case="fast",
        notes="English; DeBERTa-v3 xsmall",
    ),
    RerankerModel(
        name="cross-encoder/ms-marco-MiniLM-L-6-v2",
        size="90 MB",
        latency_10_docs="~30 ms",
        accuracy="very good (MS MARCO MRR@10 ≈ 0.39)",
        use_case="recommended",
        notes="English; the usual default",
    ),
    RerankerModel(
        name="mixedbread-ai/mxbai-rerank-base-v1",
        size="740 MB",
        latency_10_docs="~150 ms",
        accuracy="very good (BEIR nDCG@10 ≈ 0.47)",
        use_case="recommended",
        notes="English",
    ),
    RerankerModel(
        name="BAAI/bge-reranker-base",
        size="1.1 GB",
        latency_10_docs="~200 ms",
        accuracy="excellent",
        use_case="high-accuracy",
        notes="English and Chinese",
    ),
    RerankerModel(
        name="BAAI/bge-reranker-large",
        size="2.2 GB",
        latency_10_docs="~600 ms",
        accuracy="best of this list",
        use_case="high-accuracy",
        notes="English and Chinese",
    ),
)


def models_for(use_case: UseCase) -> list[RerankerModel]:
    """The curated models for one use case, in list order."""
    return [m for m in MODELS if m.use_case == use_case]


def default_model() -> RerankerModel:
    """The model suggested when someone just wants reranking to work."""
    return models_for("recommended")[0]


def help_text() -> str:
    """Help for the ``--cross-encoder`` option: one example per use case.

    Kept short because Typer/Click reflows it; the full table is
    ``--list-reranker-models``.
    """
    examples = "; ".join(
        f"{models_for(uc)[0].name} ({models_for(uc)[0].size}, {uc})" for uc in USE_CASES
    )
    return (
        "Hugging Face name of a cross-encoder to load for /rerank "
        "(env CROSS_ENCODER_MODEL). Examples: "
        f"{examples}. Any Hugging Face cross-encoder works; "
        "see --list-reranker-models."
    )


def enable_hint() -> str:
    """How to turn reranking on, used in the 'cross-encoder disabled' startup log."""
    return (
        f"Enable reranking with --cross-encoder {default_model().name} "
        "(or --cross-encoder-path /path/to/model, or env CROSS_ENCODER_MODEL); "
        "run --list-reranker-models to see more options."
    )


def render_list() -> str:
    """The ``--list-reranker-models`` output: a table per use case plus the hub link."""
    headers = ("MODEL", "SIZE", "LATENCY (10 docs)", "ACCURACY", "NOTES")
    rows = [(m.name, m.size, m.latency_10_docs, m.accuracy, m.notes) for m in MODELS]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]

    def line(cells: tuple[str, ...]) -> str:
        return "  " + "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()

    out = ["Curated cross-encoder models for reranking", ""]
    for uc in USE_CASES:
        out.append(_USE_CASE_TITLES[uc])
        out.append(line(headers))
        out.extend(
            line((m.name, m.size, m.latency_10_docs, m.accuracy, m.notes)) for m in models_for(uc)
        )
        out.append("")
    out.extend(
        [
            "Latencies are approximate CPU figures for scoring 10 documents.",
            "Any Hugging Face cross-encoder model works, not only these; explore more at",
            f"  {HUB_LINK}",
            "",
            f"Usage: ragline serve --cross-encoder {default_model().name}",
            "       ragline serve --cross-encoder-path /models/my-reranker",
        ]
    )
    return "\n".join(out)
