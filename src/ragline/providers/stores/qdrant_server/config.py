"""The Qdrant server store's options (connection ``options`` or ``store_options``):
a server (``url``) or qdrant-client's local mode (``location``), and how new
collections are laid out (see :mod:`ragline.providers.stores.qdrant_server.provider`)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, model_validator

from ragline.providers.base import ProviderConfig


class QdrantServerConfig(ProviderConfig):
    url: str | None = Field(None, description="Qdrant server URL, e.g. http://qdrant:6333 "
                            "(give either url or location).")
    api_key: SecretStr | None = Field(None, description="Qdrant API key (never logged or "
                                      "shown).")
    prefer_grpc: bool = Field(False, description="Talk gRPC (grpc_port) instead of REST.")
    grpc_port: int = Field(6334, ge=1, le=65535, description="Qdrant's gRPC port.")
    location: str | None = Field(None, description="qdrant-client local mode instead of a "
                                 "server: ':memory:' or a directory. An in-process engine for "
                                 "tests and demos: no payload indexes, sharding or stemming.")
    collection_prefix: str = Field("ragline_", pattern=r"^[A-Za-z0-9_-]{0,64}$",
                                   description="Prefix of the Qdrant collections this store "
                                   "owns (one per shard).")
    shard_number: int | None = Field(None, ge=1, le=1024, description="Qdrant shards per new "
                                     "collection (server default when unset).")
    replication_factor: int | None = Field(None, ge=1, le=64, description="Copies of each "
                                           "shard in a Qdrant cluster (server default: 1).")
    on_disk_payload: bool = Field(True, description="Keep payloads (text, metadata) on disk "
                                  "rather than in RAM on the server.")
    hnsw_ef: int = Field(128, ge=1, le=4096, description="HNSW search beam width.")
    text_analysis: Literal["english", "plain"] | None = Field(
        None, description="Full-text index of new collections: 'english' (stemming, "
        "stopwords, ASCII folding) or 'plain' (lower-cased words). Default: english on a "
        "server, plain in local mode (the only analysis local mode ranks).")
    timeout_s: int = Field(30, ge=1, le=600, description="Request timeout in seconds.")

    @model_validator(mode="after")
    def _one_target(self) -> QdrantServerConfig:
        if (self.url is None) == (self.location is None):
            raise ValueError("give exactly one of 'url' (a Qdrant server) or 'location' "
                             "(qdrant-client local mode)")
        if self.location is not None and self.text_analysis == "english":
            raise ValueError("qdrant-client local mode ranks text with text_analysis='plain' "
                             "only")
        return self
