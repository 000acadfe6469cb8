"""The embedder protocol.

``input_type`` exists because several models (E5, Gemini, Cohere) embed
queries and documents differently; models that do not care ignore it.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ragline.providers.base import Health, ProviderConfig

InputType = Literal["query", "document"]


@runtime_checkable
class Embedder(Protocol):
    name: ClassVar[str]
    kind: ClassVar[str]  # always "embedder"
    Config: ClassVar[type[ProviderConfig]]

    @property
    def model(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    @property
    def max_input_tokens(self) -> int: ...

    @property
    def connection_id(self) -> str:
        """Stable id of the endpoint/credentials, part of the embedding-cache key."""
        ...

    def embed(
        self, texts: list[str], input_type: InputType = "document"
    ) -> npt.NDArray[np.float32]:
        """Return an (n, dimension) float32 array, L2-normalised."""
        ...

    def count_tokens(self, text: str) -> int: ...

    @classmethod
    def connection_schema(cls) -> dict[str, Any]: ...

    def capabilities(self) -> list[str]: ...

    def health(self) -> Health: ...
