"""Header-aware token chunking: sizes, overlap, code/tables, headings, merging, pages."""

from __future__ import annotations

import hashlib
import itertools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ingest_support import BOOK, CODE, SENSING, make_pdf, words

from ragline.errors import InvalidInput
from ragline.ingest import chunk_document, discover, load_bytes, load_file, load_text
from ragline.ingest.blocks import markdown_sections
from ragline.ingest.chunker import section_ids, slugify
from ragline.ingest.types import Chunk, SourceDocument


def _overlap(a: str, b: str) -> str:
    """Longest suffix of ``a`` that starts ``b``."""
    for k in range(min(len(a), len(b)), 0, -1):
        if a.endswith(b[:k]):
            return b[:k]
    return ""


def _reassemble_words(chunks: list[Chunk]) -> list[str]:
    out = chunks[0].text.split()
    for prev, cur in itertools.pairwise(chunks):
        out += cur.text[len(_overlap(prev.text, cur.text)) :].split()
    return out


def md(text: str, source_id: str = "doc") -> SourceDocument:
    return load_bytes(text.encode(), f"{source_id}.md")


@pytest.mark.parametrize("target", [40, 60, 100, 256])
def test_every_chunk_of_the_book_fits_the_target(target: int) -> None:
    for path in discover(BOOK):
        chunks = chunk_document(load_file(path, BOOK), words, target_tokens=target)
        assert chunks, path
        assert [c.chunk_index for c in chunks] == list(range(len(chunks)))
        for chunk in chunks:
            assert chunk.token_count == words(chunk.text)
            assert chunk.token_count <= target, (path, chunk.text)


def test_consecutive_chunks_of_a_section_overlap_by_about_15_percent() -> None:
    chunks = chunk_document(load_file(BOOK / SENSING, BOOK), words, target_tokens=60)
    cameras = [c for c in chunks if c.section_id == "cameras"]
    assert len(cameras) >= 3
    for prev, cur in itertools.pairwise(cameras):
        shared = _overlap(prev.text, cur.text)
        assert 0 < words(shared) <= int(60 * 0.15), (prev.text, cur.text)
    # no overlap across a section boundary
    first_lidar = next(c for c in chunks if c.section_id.startswith("lidar"))
    assert first_lidar.text.startswith("## Lidar and Depth")


def test_overlap_prefers_whole_sentences() -> None:
    para = " ".join(f"Short fact {i} here." for i in range(40))  # 4-word sentences
    chunks = chunk_document(md(f"## S\n\n{para}"), words, target_tokens=60)
    assert len(chunks) >= 3
    for prev, cur in itertools.pairwise(chunks):
        shared = _overlap(prev.text, cur.text)
        assert shared.startswith("Short fact") and shared.endswith("here.")
        assert 5 <= words(shared) <= 9


def test_no_text_is_lost_and_order_is_kept() -> None:
    doc = load_file(BOOK / SENSING, BOOK)
    chunks = chunk_document(doc, words, target_tokens=50)
    assert _reassemble_words(chunks) == doc.text.split()


def test_overlap_zero_gives_disjoint_chunks() -> None:
    doc = load_file(BOOK / SENSING, BOOK)
    chunks = chunk_document(doc, words, target_tokens=50, overlap=0)
    assert sum(c.token_count for c in chunks) == words(doc.text)


def test_heading_paths_section_ids_and_titles() -> None:
    chunks = chunk_document(load_file(BOOK / SENSING, BOOK), words, target_tokens=60)
    by_section = {c.section_id: c for c in chunks}
    assert by_section["root"].heading_path == []
    assert by_section["root"].section_title == "Lesson 1.1: How Robots Sense"
    lidar = by_section["lidar-and-depth/lidar"]
    assert lidar.heading_path == ["Lidar and Depth", "Lidar"]
    assert lidar.section_title == "Lidar"
    # the "## Lidar and Depth" heading has no text of its own: it joins its first sub-section
    assert lidar.text.startswith("## Lidar and Depth\n\n### Lidar\n\nLidar sends")
    assert "lidar-and-depth" not in by_section
    assert by_section["lidar-and-depth/depth-cameras"].heading_path[0] == "Lidar and Depth"
    assert not any(re.fullmatch(r"#+ .*", c.text.strip()) for c in chunks)  # no heading-only chunk


def test_section_ids_are_unique_slugs() -> None:
    text = (
        "# T\n\n## Setup\n\nA.\n\n### Example\n\nB.\n\n## Setup\n\nC.\n\n"
        "## Über Café! {#custom}\n\nD."
    )
    assert section_ids(markdown_sections(text)) == [
        "root", "setup", "setup/example", "setup-2", "custom",
    ]  # fmt: skip
    assert slugify("Setting up ROS 2!") == "setting-up-ros-2"
    assert slugify("Über Café") == "uber-cafe"


def test_headings_inside_code_blocks_are_not_sections() -> None:
    doc = md("# T\n\nIntro text here.\n\n```bash\n# install\n## not a heading\n```\n\nAfter code.")
    chunks = chunk_document(doc, words, target_tokens=100)
    assert len(chunks) == 1 and chunks[0].section_id == "root"


def _fences_balanced(text: str) -> bool:
    return sum(1 for line in text.split("\n") if line.strip().startswith("```")) % 2 == 0


def test_code_blocks_and_tables_are_never_cut_when_they_fit() -> None:
    doc = load_file(BOOK / CODE, BOOK)
    raw = doc.text
    code = raw[raw.index("```python\nimport rclpy") : raw.index("```\n\nRun it") + 3]
    table = raw[raw.index("| Sensor |") : raw.index("| 100 Hz |") + len("| 100 Hz |")]
    assert words(code) <= 60 and words(table) <= 60
    for target in (60, 80, 120):
        chunks = chunk_document(doc, words, target_tokens=target)
        assert sum(code in c.text for c in chunks) >= 1, target
        assert sum(table in c.text for c in chunks) >= 1, target
        assert all(_fences_balanced(c.text) for c in chunks)
        assert all(c.token_count <= target for c in chunks)


def test_oversized_code_block_is_split_at_lines_and_refenced() -> None:
    doc = load_file(BOOK / CODE, BOOK)
    chunks = chunk_document(doc, words, target_tokens=60)
    launch = [c for c in chunks if c.section_id == "a-long-launch-file"]
    assert len(launch) >= 2
    for chunk in launch:
        assert "```python\n" in chunk.text and _fences_balanced(chunk.text)
    code_lines = [line for c in launch for line in c.text.split("\n") if "nodes.append" in line]
    assert len(code_lines) == len(set(code_lines)) == 24  # each line once, none cut
    sizes = [c.token_count for c in launch]
    assert max(sizes) - min(sizes) <= 20  # balanced halves, not a full part and a scrap


def test_oversized_table_repeats_its_header() -> None:
    rows = "\n".join(f"| sensor{i} | /topic{i} | {i} Hz |" for i in range(40))
    doc = md(f"# T\n\n## Rates\n\n| Sensor | Topic | Rate |\n|---|---|---|\n{rows}\n")
    chunks = chunk_document(doc, words, target_tokens=60)
    table_chunks = [c for c in chunks if "sensor" in c.text]
    assert len(table_chunks) >= 3
    assert all("| Sensor | Topic | Rate |\n|---|---|---|" in c.text for c in table_chunks)
    assert all(c.token_count <= 60 for c in chunks)


def test_a_single_table_row_over_the_target_is_cut_by_words() -> None:
    long_row = "| " + " ".join(f"w{i}" for i in range(150)) + " |"
    doc = md(f"## T\n\n| A |\n|---|\n| short |\n{long_row}\n| tail |\n")
    chunks = chunk_document(doc, words, target_tokens=60, overlap=0)
    assert all(c.token_count <= 60 for c in chunks)
    kept = [w for c in chunks for w in c.text.split()]
    assert [w for w in kept if w.startswith("w")] == [f"w{i}" for i in range(150)]


def test_small_tail_merges_back_and_sections_balance() -> None:
    para = " ".join(f"Sentence number {i} is here." for i in range(13))  # 65 words
    chunks = chunk_document(md(f"## Only\n\n{para}"), words, target_tokens=60, overlap=0)
    assert len(chunks) == 2
    assert abs(chunks[0].token_count - chunks[1].token_count) <= 6  # not 60 + 7


def test_small_chunk_merges_with_a_neighbour_section() -> None:
    text = "## A\n\nTiny.\n\n## B\n\n" + " ".join(["word"] * 30)
    chunks = chunk_document(md(text), words, target_tokens=60, min_tokens=20)
    assert len(chunks) == 1
    # the merged chunk reads from A but belongs to B, which gave it most of its text
    assert chunks[0].text.startswith("## A\n\nTiny.\n\n## B")
    assert (chunks[0].section_id, chunks[0].heading_path) == ("b", ["B"])


def test_plain_text_uses_the_recursive_splitter() -> None:
    sentences = [f"Plain sentence {i} talks about robots and their sensors." for i in range(60)]
    text = "\n\n".join(" ".join(sentences[i : i + 6]) for i in range(0, 60, 6))
    doc = load_text(text, title="Notes")
    chunks = chunk_document(doc, words, target_tokens=80)
    assert len(chunks) > 5
    assert all(c.token_count <= 80 for c in chunks)
    assert all(c.heading_path == [] and c.section_id == "root" for c in chunks)
    assert all(c.text.startswith("Plain sentence") for c in chunks)  # cut at sentences
    assert _reassemble_words(chunks) == doc.text.split()


def test_one_giant_word_is_cut_by_characters() -> None:
    doc = load_text("x" * 5000)
    chunks = chunk_document(doc, lambda s: (len(s) + 9) // 10, target_tokens=100)
    assert "".join(c.text for c in chunks) == "x" * 5000
    assert all(len(c.text) <= 1000 for c in chunks)


def test_pdf_chunks_record_the_page_they_start_on() -> None:
    pages = [
        f"Page {n} begins. " + " ".join(f"Fact {n}.{i} about actuators." for i in range(25))
        for n in (1, 2, 3)
    ]
    doc = load_bytes(make_pdf(pages), "manual.pdf")
    chunks = chunk_document(doc, words, target_tokens=60)
    assert {c.page_number for c in chunks} == {1, 2, 3}
    assert [c.page_number for c in chunks] == sorted(c.page_number or 0 for c in chunks)
    for chunk in chunks:
        first_fact = re.search(r"Fact (\d)\.", chunk.text) or re.search(r"Page (\d)", chunk.text)
        assert first_fact and int(first_fact.group(1)) == chunk.page_number
    assert all(c.token_count <= 60 for c in chunks)


def test_chunking_is_deterministic_and_hashes_the_text() -> None:
    doc = load_file(BOOK / SENSING, BOOK)
    a = chunk_document(doc, words, target_tokens=60)
    b = chunk_document(doc, words, target_tokens=60)
    assert a == b
    assert all(c.content_hash == hashlib.sha256(c.text.encode()).hexdigest() for c in a)


def test_markdown_flag_overrides_the_text_format() -> None:
    doc = load_text("## Heading\n\nBody one.\n\n## Other\n\nBody two.")
    assert {c.section_id for c in chunk_document(doc, words, 100)} == {"root"}
    forced = chunk_document(doc, words, 100, min_tokens=0, markdown=True)
    assert [c.section_id for c in forced] == ["heading", "other"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"target_tokens": 4}, "target_tokens"), ({"overlap": 0.6}, "overlap")],
)
def test_bad_settings_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        chunk_document(load_text("abc"), words, **kwargs)


_word = st.text(alphabet="abcdefghij", min_size=1, max_size=8)
_sentence = st.lists(_word, min_size=1, max_size=30).map(lambda ws: " ".join(ws) + ".")
_para = st.lists(_sentence, min_size=1, max_size=8).map(" ".join)
_block = st.one_of(
    _para,
    _para.map(lambda p: "## " + p[:20]),
    st.lists(_word, min_size=1, max_size=40).map(lambda ws: "```\n" + "\n".join(ws) + "\n```"),
)


@settings(max_examples=60, deadline=None)
@given(blocks=st.lists(_block, min_size=1, max_size=12), target=st.integers(20, 120))
def test_property_chunks_fit_and_keep_every_word(blocks: list[str], target: int) -> None:
    text = "\n\n".join(blocks)
    doc = md(text)
    chunks = chunk_document(doc, words, target_tokens=target, overlap=0)
    assert all(c.token_count <= target for c in chunks)
    kept = [w for c in chunks for w in c.text.split() if w != "```"]
    assert kept == [w for w in doc.text.split() if w != "```"]
