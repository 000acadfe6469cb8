"""Qdrant server (or cluster) through qdrant-client."""
