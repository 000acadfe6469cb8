"""A Python client for a ragline server's HTTP API, blocking (:class:`Client`) and asyncio
(:class:`AsyncClient`); see docs/client.md.

::

    from ragline.client import Client

    with Client("http://127.0.0.1:8000", api_key="rl_...") as rl:
        rl.create_collection("notes", embed_provider="local")
        rl.add_documents("notes", [{"id": "n1", "text": "Rerankers read pairs."}])
        for hit in rl.search("notes", "what reads pairs?").results:
            print(hit.score, hit.text)

Errors are the ``ragline.errors`` classes (``CollectionNotFound``, ``Forbidden``...),
the same ones the ``Ragline`` facade raises in-process; an unreachable server is
``ServerUnreachable`` after the retries of :class:`RetryPolicy`.
"""

from ragline.client import models
from ragline.client.aio import AsyncClient
from ragline.client.sync import DEFAULT_URL, Client
from ragline.client.transport import RetryPolicy, error_from_response

__all__ = ["DEFAULT_URL", "AsyncClient", "Client", "RetryPolicy", "error_from_response", "models"]
