"""The records every use case shares: collections, documents, embedders, the access policy,
input limits, the disk guard and the provider slots."""
