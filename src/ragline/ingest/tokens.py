"""Token counters to pass to :func:`ragline.ingest.chunker.chunk_document`.

Chunk sizes only mean something in the embedding model's own tokens (a
MiniLM input is cut at 256 word pieces, an OpenAI one at 8191 BPE tokens),
so the embedder should supply the counter. These are the two generic ones.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def whitespace_tokens(text: str) -> int:
    """Whitespace-separated words: a model-free approximation (and the tests' counter)."""
    return len(text.split())


def tokenizer_json_counter(path: str | Path) -> Callable[[str], int]:
    """A counter from a Hugging Face ``tokenizer.json`` (needs the ``tokenizers`` package).

    Padding and truncation baked into the file are switched off, and special
    tokens are not counted: a length cut at 128 would make every long text
    look short.
    """
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_padding()
    tokenizer.no_truncation()

    def count(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    return count
