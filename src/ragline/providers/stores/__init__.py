"""Vector store providers."""
