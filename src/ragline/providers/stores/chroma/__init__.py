"""ChromaDB as a ragline store (in-process or a Chroma server); needs ``ragline[chroma]``."""
