"""Reranking providers."""
