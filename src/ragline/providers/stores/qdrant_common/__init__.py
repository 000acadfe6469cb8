"""What the Qdrant-backed stores share: the filter translation, payload layout and
the payload-index policy. Neither SDK is imported here: filters are built in
Qdrant's JSON form, which each provider turns into its SDK's models."""
