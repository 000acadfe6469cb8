"""`ragline eval questions`: loading, ranks, metrics, thresholds, baseline diff, exit codes."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragline.errors import InvalidInput
from ragline.evaluation.questions import (
    QuestionResult,
    Report,
    check_thresholds,
    diff,
    evaluate,
    load_questions,
    matches,
    score,
)
from ragline.facade import Ragline
from tests.ingestion_support import BOOK, fake_settings, ingest_tree

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "book-questions.yaml"


def _result(qid: str, rank: int | None, source_rank: int | None = None) -> QuestionResult:
    return QuestionResult(qid, f"question {qid}", ["a"], rank,
                          rank if source_rank is None else source_rank)


# --- pure parts ----------------------------------------------------------------------------


def test_load_jsonl_and_yaml_with_aliases(tmp_path: Path) -> None:
    jsonl = tmp_path / "q.jsonl"
    jsonl.write_text('{"question": "a?", "expected": "x.md"}\n\n'
                     '{"id": "b", "query": "b?", "sources": ["y", "z.md"], '
                     '"where": {"tier": 1}}\n')
    qs = load_questions(jsonl)
    assert [(q.id, q.question, q.expected, q.where) for q in qs] == [
        ("q1", "a?", ["x.md"], None), ("b", "b?", ["y", "z.md"], {"tier": 1})]
    listed = tmp_path / "q.yaml"
    listed.write_text("- question: c?\n  parent_doc_id: m/c/01-x\n")
    assert load_questions(listed)[0].expected == ["m/c/01-x"]
    example = load_questions(EXAMPLE)
    assert len(example) == 6 and example[-1].where == {"hardware_tier": {"$lte": 2}}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"question": "a?"}\n', "no expected source"),
        ('{"expected": "x"}\n', "no 'question'"),
        ('{"question": "a", "expected": "x", "id": 1}\n{"question": "b", "expected": "y", '
         '"id": 1}\n', "used twice"),
        ("{not json\n", "not valid JSONL"),
        ("", "no questions"),
    ],
)  # fmt: skip
def test_bad_question_files_are_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(content)
    with pytest.raises(InvalidInput, match=message):
        load_questions(path)


def test_expected_sources_match_paths_ids_and_root_prefixes() -> None:
    meta = {"parent_doc_id": "module-1/chapter-2/03-x", "source_path": "module-1/chapter-2/03-x.md"}
    for expected in ("module-1/chapter-2/03-x", "module-1/chapter-2/03-x.md",
                     "./module-1/chapter-2/03-x.md", "docs/module-1/chapter-2/03-x.md"):
        assert matches(expected, meta), expected
    for expected in ("module-1/chapter-2/03", "chapter-2/03-x", "module-1/chapter-2/03-x.txt"):
        assert not matches(expected, meta), expected


def test_metrics_from_ranks() -> None:
    results = [_result("a", 1), _result("b", 2), _result("c", 4, 2), _result("d", None)]
    m = score(results)
    assert (m["hit@1"], m["hit@3"], m["hit@5"]) == (0.25, 0.5, 0.75)
    assert m["mrr"] == round((1 + 1 / 2 + 1 / 4) / 4, 4)
    assert m["source_hit@3"] == 0.75 and m["not_found"] == 1 and m["questions"] == 4
    assert check_thresholds(m, {"hit@1": 0.25, "mrr": 0.4}) == []
    failures = check_thresholds(m, {"hit@1": 0.3, "hit@10": 0.1})
    assert failures[0].startswith("hit@1 = 0.2500 is below the minimum 0.3000")
    assert failures[1].startswith("hit@10: not measured")


def test_diff_lists_regressions_improvements_and_question_changes() -> None:
    old = Report(score([_result("a", 1), _result("b", 3), _result("c", None),
                        _result("gone", 1)]), [_result("a", 1), _result("b", 3),
                                               _result("c", None), _result("gone", 1)], {})
    new_results = [_result("a", 2), _result("b", 1), _result("c", None), _result("new", 1)]
    d = diff(Report(score(new_results), new_results, {}), old.to_json())
    assert [(c.id, c.before, c.after) for c in d.regressed] == [("a", 1, 2)]
    assert [(c.id, c.before, c.after) for c in d.improved] == [("b", 3, 1)]
    assert (d.added, d.removed) == (["new"], ["gone"])
    assert d.metrics["hit@1"] == (0.5, 0.5)
    assert d.to_json()["metrics"]["mrr"]["delta"] == round(0.625 - 0.5833, 4)
    lost = [_result("a", None)]
    assert [c.id for c in diff(Report(score(lost), lost, {}), old.to_json()).regressed] == ["a"]


# --- the command -------------------------------------------------------------------------------


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    settings = fake_settings(tmp_path)
    rl = Ragline(settings).start()
    try:
        ingest_tree(rl, "book", rl.owner().tenant, BOOK)
    finally:
        rl.close()
    return settings.data_dir


def _run(data_dir: Path, *extra: str) -> tuple[int, str, str]:
    from ragline.cli.main import app

    args = ["eval", "questions", str(EXAMPLE), "--collection", "book", "--mode", "sparse",
            "--data-dir", str(data_dir), *extra]
    result = CliRunner().invoke(app, args)
    return result.exit_code, result.stdout, result.stderr


def test_command_reports_ranks_thresholds_and_diffs(data_dir: Path, tmp_path: Path) -> None:
    code, out, err = _run(data_dir, "--json", "--output", str(tmp_path / "run1.json"))
    assert code == 0, err
    report = json.loads(out.strip().splitlines()[-1])
    assert report == json.loads((tmp_path / "run1.json").read_text())
    ranks = {q["id"]: q["rank"] for q in report["questions"]}
    # BM25 on this tiny book finds every lesson; most of them first
    assert all(rank is not None and rank <= 5 for rank in ranks.values()), ranks
    assert report["metrics"]["hit@5"] == 1.0 and report["metrics"]["hit@1"] >= 0.5
    assert report["config"] == {"collection": "book", "mode": "sparse", "depth": 50,
                                "ks": [1, 3, 5], "where": None}
    assert report["failures"] == []
    assert "hit@1" in err and "lidar" in err

    # thresholds: met -> 0, missed -> 1 with the metric named
    assert _run(data_dir, "--min-hit5", "1.0", "--min-mrr", "0.5")[0] == 0
    code, _, err = _run(data_dir, "--min-hit1", "1.01")
    assert code == 1 and "hit@1" in err and "below the minimum" in err

    # a baseline where every question was first: the others are listed as regressions
    baseline = json.loads((tmp_path / "run1.json").read_text())
    for q in baseline["questions"]:
        q["rank"] = 1
    (tmp_path / "best.json").write_text(json.dumps(baseline))
    worse = [q for q, r in ranks.items() if r > 1]
    code, out, err = _run(data_dir, "--baseline", str(tmp_path / "best.json"), "--json")
    assert code == 0
    regressed = json.loads(out.strip().splitlines()[-1])["diff"]["regressed"]
    assert sorted(c["id"] for c in regressed) == sorted(worse)
    if worse:
        code, _, err = _run(data_dir, "--baseline", str(tmp_path / "best.json"),
                            "--max-regressions", "0")
        assert code == 1 and "rank worse than in the baseline" in err
    # the same run as baseline: nothing moved
    code, out, _ = _run(data_dir, "--baseline", str(tmp_path / "run1.json"), "--json")
    changes = json.loads(out.strip().splitlines()[-1])["diff"]
    assert code == 0 and changes["regressed"] == changes["improved"] == []


def test_command_bad_input_exits_2(data_dir: Path, tmp_path: Path) -> None:
    assert _run(data_dir, "--where", "{nope")[0] == 2
    assert _run(data_dir, "--baseline", str(tmp_path / "missing.json"))[0] == 2
    assert _run(data_dir, "--k", "0")[0] == 2
    from ragline.cli.main import app

    bad = tmp_path / "q.jsonl"
    bad.write_text('{"question": "x"}\n')
    result = CliRunner().invoke(app, ["eval", "questions", str(bad), "--collection", "book",
                                      "--data-dir", str(data_dir)])
    assert result.exit_code == 2 and "no expected source" in result.stderr
    result = CliRunner().invoke(app, ["eval", "questions", str(EXAMPLE), "--collection", "nope",
                                      "--data-dir", str(data_dir)])
    assert result.exit_code == 3  # not found (docs/cli.md)


# --- graded relevance (issue 36) ---------------------------------------------------------------

JUDGED = Path(__file__).resolve().parents[1] / "fixtures" / "judged_book_questions.yaml"
JUDGED_BOOK = Path(__file__).resolve().parents[1] / "fixtures" / "judged_book"


def test_graded_relevance_by_source_and_heading_with_caps(tmp_path: Path) -> None:
    path = tmp_path / "q.yaml"
    path.write_text(
        "section_caps: {Try With AI: 0}\n"
        "questions:\n"
        "  - id: q1\n    question: how?\n    relevant:\n"
        "      'a.md#Setup': 2\n      a.md: 1\n      b.md: 1\n"
        "  - id: q2\n    question: old style?\n    expected: d.md\n")
    q1, q2 = load_questions(path)
    assert q1.expected == ["a.md"] and q1.top_grade() == 2  # the sources graded highest

    def meta(source: str, *headings: str) -> dict[str, object]:
        return {"source_path": source, "heading_path": list(headings)}

    assert q1.grade(meta("a.md", "Setup", "Step 1")) == 2  # the section, at any depth
    assert q1.grade(meta("a.md", "setup")) == 2  # headings compare case-insensitively
    assert q1.grade(meta("a.md", "Other")) == 1  # the lesson as a whole
    assert q1.grade(meta("a.md", "Try With AI", "Prompt 1")) == 0  # capped
    assert q1.grade(meta("c.md", "Setup")) == 0
    # a merged chunk filed under another section still carries Setup in heading_paths
    merged = {**meta("a.md", "Intro"), "heading_paths": ["Intro", "Setup > Step 2"]}
    assert q1.grade(merged) == 2
    assert q2.grade(meta("d.md", "Intro")) == 2  # 'expected' alone: its sources grade 2
    assert q2.grade(meta("d.md", "Try With AI")) == 0  # the file's caps apply to it too

    answers = {
        "how?": [meta("b.md", "Intro"), meta("a.md", "Setup", "Step 1"),
                 meta("a.md", "Try With AI"), meta("c.md"), meta("a.md", "Other")],
        "old style?": [meta("x.md"), meta("y.md")],
    }

    def searcher(question: str, *_: object) -> list[tuple[str, dict[str, object]]]:
        return [(f"id{i}", m) for i, m in enumerate(answers[question])]

    report = evaluate(searcher, [q1, q2], "c")
    r1, r2 = report.questions
    assert (r1.rank, r1.grades) == (2, [1, 2, 0, 0, 1])
    # DCG = 1/log2(2) + 2/log2(3) + 1/log2(6); ideal [2, 1, 1]: 2 + 1/log2(3) + 1/log2(4)
    dcg = 1 + 2 / math.log2(3) + 1 / math.log2(6)
    assert r1.ndcg == round(dcg / (2 + 1 / math.log2(3) + 0.5), 4) == 0.846
    assert (r2.rank, r2.grades, r2.ndcg) == (None, [0, 0], 0.0)
    m = report.metrics
    assert (m["hit@1"], m["hit@3"], m["mrr"]) == (0.0, 0.5, 0.25)
    assert (m["ndcg@5"], m["useful@5"]) == (0.423, 0.3)  # useful: 3 of the 10 slots


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("- question: a?\n  relevant: {x.md: 5}\n", "whole number from 0 to 3"),
        ("- question: a?\n  relevant: [x.md]\n", "'relevant' must map"),
        ("- question: a?\n  relevant: {x.md: 0}\n", "no expected source"),
        ("- question: a?\n  relevant: {'#Setup': 2}\n", "names no source"),
        ("section_caps: [a]\nquestions:\n- question: a?\n  expected: x\n", "section_caps"),
    ],
)  # fmt: skip
def test_bad_judgements_are_refused(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "q.yaml"
    path.write_text(content)
    with pytest.raises(InvalidInput, match=message):
        load_questions(path)


def test_command_reports_ndcg_and_useful_on_a_judged_book(tmp_path: Path) -> None:
    from ragline.cli.main import app

    settings = fake_settings(tmp_path)
    rl = Ragline(settings).start()
    try:
        rl.services.ingest.run_directory("book", rl.owner().tenant, JUDGED_BOOK)
    finally:
        rl.close()
    result = CliRunner().invoke(app, [
        "eval", "questions", str(JUDGED), "--collection", "book", "--mode", "sparse",
        "--data-dir", str(settings.data_dir), "--json"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    m = report["metrics"]
    assert m["questions"] == 3 and m["hit@1"] == 1.0 and m["mrr"] == 1.0
    assert 0.0 < m["ndcg@5"] <= 1.0 and 0.0 < m["useful@5"] <= 1.0
    by_id = {q["id"]: q for q in report["questions"]}
    # the PWM section answers first; every graded hit is in the report's grades
    assert by_id["pwm"]["grades"][0] == 2 and by_id["smoothing"]["grades"][0] == 2
    assert "useful" in result.stderr and "ndcg@5" in result.stderr
