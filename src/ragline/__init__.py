"""ragline: a self-hosted RAG backend (ingest, index, retrieve, answer).

The library entry point is :class:`ragline.facade.Ragline`; the HTTP server and
the CLI are thin layers over it, so all three behave the same.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
