"""Adapters to the outside world (stores, embedders, rerankers, LLMs) and their registry."""
