"""The catalog: everything that is not vectors (collections, ingestion state, jobs)."""
