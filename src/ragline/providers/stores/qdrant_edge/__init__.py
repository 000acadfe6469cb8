"""Qdrant Edge: the Qdrant engine in-process, the default store."""
