"""Diversity in the top 5 on a small book (issue 36): the "Try With AI" and exercise
chunks and the chapter overview around a lesson wait below the lesson hits, by default,
through the facade the HTTP API and the eval commands use. Fixture: tests/fixtures/judged_book."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ragline.facade import Ragline, SearchRequest
from tests.ingestion_support import fake_settings

BOOK = Path(__file__).resolve().parents[1] / "fixtures" / "judged_book"
QUERY = "Ask your AI assistant about the motor duty cycle and the range sensor readings"


def _top5(tmp_path: Path, **overrides: Any) -> list[tuple[str, str]]:
    rl = Ragline(fake_settings(tmp_path, **overrides)).start()
    try:
        rl.services.ingest.run_directory("book", rl.owner().tenant, BOOK)
        res = rl.search.query_sync(rl.owner(), SearchRequest(collection="book", query=QUERY,
                                                        mode="sparse", limit=5))
        return [(h.metadata["source_path"].rsplit("/", 1)[-1],
                 " > ".join(h.metadata["heading_path"])) for h in res.hits]
    finally:
        rl.close()


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Any], list[Any]]:
    off = _top5(tmp_path_factory.mktemp("off"), search_diversity_asides=5)
    on = _top5(tmp_path_factory.mktemp("on"))
    return off, on


def test_without_diversity_asides_crowd_the_top_5(both: tuple[list[Any], list[Any]]) -> None:
    off, _ = both
    # BM25 likes the exercise prompts: both "Try With AI" chunks and the overview are in
    assert off == [("02-range-sensors.md", "Try With AI"), ("01-driving-motors.md", "Try With AI"),
                   ("01-driving-motors.md", "A first motor node"),
                   ("01-driving-motors.md", "Speed control with PWM"), ("README.md", "")]


def test_by_default_the_top_5_are_lesson_chunks(both: tuple[list[Any], list[Any]]) -> None:
    _, on = both
    # the asides wait for the next window: both lessons' teaching sections fill the top 5
    assert on == [("01-driving-motors.md", "A first motor node"),
                  ("01-driving-motors.md", "Speed control with PWM"),
                  ("02-range-sensors.md", "Smoothing noisy readings"),
                  ("02-range-sensors.md", "Ultrasonic and infrared sensors"),
                  ("01-driving-motors.md", "A first motor node")]
