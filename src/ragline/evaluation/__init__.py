"""Retrieval-quality evaluation on standard datasets."""
