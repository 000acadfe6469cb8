"""What a chat tool is: a name, a description, a JSON schema for its arguments, a run.

Tools are plugins (entry-point group ``ragline.tools``), so the tool-decision
prompt lists whatever is installed. A tool gets a :class:`ToolContext` per call:
the caller's tenant and collection and the retriever bound to them, so a tool
cannot reach another tenant's data. ``run`` returns any JSON-serialisable value
(it goes into the post-tool prompt as JSON); an expected failure (a refused URL)
is returned as ``{"error": ...}`` so the model can explain it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

from ragline.services.search.rag_context import Retriever, TurnEmbeddings


@dataclass
class ToolContext:
    tenant: str
    collection: str | None
    retriever: Retriever
    allow_private_urls: bool = False
    embeddings: TurnEmbeddings = field(default_factory=TurnEmbeddings)
    options: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Tool(Protocol):
    name: ClassVar[str]
    description: ClassVar[str]
    arguments: ClassVar[dict[str, Any]]
    """JSON schema (an ``object``) of the ``arguments`` the model must send."""

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any: ...
