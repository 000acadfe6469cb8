"""Embedding providers.

Importing any embedder forces the Hugging Face libraries offline: ragline never
downloads models at run time, and without this a hub lookup retries for ~70 s
before failing (shared/research/offline-models.md). ``setdefault`` leaves an
explicit operator choice alone.
"""

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
