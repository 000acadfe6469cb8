"""Issue 36 on the Markdown chunker: chunks under spec 004's 100 tokens are merged (EC-4),
a heading or caption stays with the code it introduces, merged chunks belong to the
section that gave them most of their text. Fixture: tests/fixtures/judged_book."""

from __future__ import annotations

from pathlib import Path

from ingest_support import words

from ragline.ingest import chunk_document, load_bytes, load_file
from ragline.ingest.chunker import MIN_TOKENS

BOOK = Path(__file__).resolve().parents[1] / "fixtures" / "judged_book"
MOTORS = "module-1-motion/chapter-1-motors/01-driving-motors.md"
SENSORS = "module-1-motion/chapter-1-motors/02-range-sensors.md"


def test_chunks_under_100_tokens_join_their_neighbours() -> None:
    assert MIN_TOKENS == 100
    doc = load_file(BOOK / MOTORS, BOOK)
    unmerged = chunk_document(doc, words, target_tokens=200, min_tokens=0)
    assert sum(c.token_count < 100 for c in unmerged) == 7  # every section on its own
    chunks = chunk_document(doc, words, target_tokens=200)
    assert [c.token_count for c in chunks] == [130, 149]
    assert all(c.token_count >= MIN_TOKENS for c in chunks)
    # nothing lost, nothing repeated: the chunks are the sections in reading order
    assert "\n\n".join(c.text for c in chunks).split() == doc.text.split()
    # a merged chunk belongs to the section that gave it the most text: the objectives
    # (18 words) read first but the chunk is about PWM, and the exercises ride along
    # with the motor node, so neither chunk is filed under an exercise-type heading
    assert [c.heading_path for c in chunks] == [["Speed control with PWM"],
                                                ["A first motor node"]]
    # and lists every section it covers, so graded questions still find "Why a motor driver"
    assert chunks[0].heading_paths == [[], ["Learning Objectives"], ["Why a motor driver"],
                                       ["Speed control with PWM"]]
    assert chunks[1].heading_paths == [["A first motor node"], ["Try With AI"], ["Exercises"]]
    assert all(c.heading_paths == [] for c in unmerged)
    # the minimum is at most half the target: small targets still merge what fits
    small = chunk_document(load_file(BOOK / SENSORS, BOOK), words, target_tokens=60)
    assert [c.token_count for c in small] == [60, 48, 28]


def test_a_caption_stays_with_the_code_it_introduces() -> None:
    doc = load_file(BOOK / MOTORS, BOOK)
    chunks = chunk_document(doc, words, target_tokens=60)
    caption = "Create `motor_node.py` with this code:"
    ending = [c for c in chunks if c.text.rstrip().endswith(caption)]
    assert ending == []  # before issue 36 the prose chunk ended on it
    [with_code] = [c for c in chunks if caption in c.text]
    assert with_code.text.startswith(caption + "\n\n```python")
    assert with_code.text.rstrip().endswith("```")
    assert with_code.heading_path == ["A first motor node"]
    # every chunk still fits, and each code block is whole in one chunk
    assert all(c.token_count <= 60 for c in chunks)
    assert sum(c.text.count("```") for c in chunks) == 2


def test_a_heading_over_code_moves_with_it() -> None:
    code = "```python\n" + "\n".join(f"x{i} = {i}" for i in range(16)) + "\n```"
    text = ("# T\n\n## Setup\n\n" + " ".join(["word"] * 30) + "\n\n### Run it\n\n" + code
            + "\n\n" + " ".join(["tail"] * 20))
    doc = load_bytes(text.encode(), "doc.md")
    chunks = chunk_document(doc, words, target_tokens=60, min_tokens=0)
    assert not any(c.text.rstrip().endswith("### Run it") for c in chunks)
    assert any(c.text.startswith("### Run it\n\n```python") for c in chunks)
