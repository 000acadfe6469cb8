"""A deterministic, model-free embedder for unit tests of code around embedders.

Why not a random vector per text: retrieval tests need *some* semantics. Each
vector is the normalised sum of fixed pseudo-random vectors of the text's
lower-cased words (a hashed bag of words), so texts sharing words are closer
than texts that do not, identically on every machine and run.

Deliberately not registered under the ``ragline.embedders`` entry points: it can
never be selected by a production config.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt
from pydantic import Field

from ragline.providers.base import Health, ProviderConfig
from ragline.providers.embedders.base import InputType
from ragline.providers.embedders.util import check_inputs, l2_normalise

_WORD = re.compile(r"\w+", re.UNICODE)


class FakeEmbedderConfig(ProviderConfig):
    dimension: int = Field(16, ge=2)
    model: str = "fake-bow"
    max_input_tokens: int = 256
    query_differs: bool = Field(
        False, description="Mix input_type into the vectors (like E5-style models)."
    )


class FakeEmbedder:
    """Counts calls (``calls``, ``texts_embedded``, ``log``) so tests can assert on them.

    ``delay`` seconds are slept per ``embed()`` call to imitate model latency;
    ``fail_with`` makes every call raise that exception.
    """

    name: ClassVar[str] = "fake"
    kind: ClassVar[str] = "embedder"
    Config: ClassVar[type[ProviderConfig]] = FakeEmbedderConfig
    CAPABILITIES: ClassVar[list[str]] = ["embeddings"]

    def __init__(
        self,
        config: FakeEmbedderConfig | None = None,
        *,
        delay: float = 0.0,
        fail_with: BaseException | None = None,
        connection_id: str = "fake:0",
        **overrides: Any,
    ) -> None:
        self.config = config or FakeEmbedderConfig(**overrides)
        self.delay = delay
        self.fail_with = fail_with
        self._connection_id = connection_id
        self._lock = threading.Lock()
        self.calls = 0
        self.texts_embedded = 0
        self.log: list[tuple[list[str], str]] = []

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def dimension(self) -> int:
        return self.config.dimension

    @property
    def max_input_tokens(self) -> int:
        return self.config.max_input_tokens

    @property
    def connection_id(self) -> str:
        return self._connection_id

    def _word_vector(self, word: str) -> npt.NDArray[np.float64]:
        seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
        return np.random.default_rng(seed).standard_normal(self.config.dimension)

    def vector(self, text: str, input_type: InputType = "document") -> npt.NDArray[np.float32]:
        """The vector of one text, without counting a call (for expected values)."""
        words = _WORD.findall(text.lower()) or [""]
        total = np.sum([self._word_vector(w) for w in words], axis=0)
        if self.config.query_differs:
            total = total + 0.5 * self._word_vector(f"\x00{input_type}")
        row: np.ndarray = l2_normalise(total[None, :])[0]
        return row

    def embed(
        self, texts: list[str], input_type: InputType = "document"
    ) -> npt.NDArray[np.float32]:
        check_inputs(texts, input_type)
        with self._lock:
            self.calls += 1
            self.texts_embedded += len(texts)
            self.log.append((list(texts), input_type))
        if self.delay:
            time.sleep(self.delay)
        if self.fail_with is not None:
            raise self.fail_with
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self.vector(t, input_type) for t in texts])

    def count_tokens(self, text: str) -> int:
        return len(_WORD.findall(text))

    @classmethod
    def connection_schema(cls) -> dict[str, Any]:
        return cls.Config.model_json_schema()

    def capabilities(self) -> list[str]:
        return list(self.CAPABILITIES)

    def health(self) -> Health:
        details = {"model": self.model, "calls": self.calls}
        if self.fail_with is not None:
            return Health.now("down", details, repr(self.fail_with))
        return Health.now("ok", details)
