"""LLM providers."""
