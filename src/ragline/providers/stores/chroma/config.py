"""Configuration of the Chroma store: in-process (a directory) or a Chroma server."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import Field, SecretStr, field_validator, model_validator

from ragline.providers.base import ProviderConfig

# Chroma collection names: 3-512 of [a-zA-Z0-9._-], alphanumeric at both ends
_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class ChromaConfig(ProviderConfig):
    """Give ``path`` for an in-process ``PersistentClient``, or ``host`` for a server."""

    path: Path | None = Field(
        None, description="Directory of an in-process Chroma database (PersistentClient). "
        "Leave empty and set 'host' to use a Chroma server instead.")
    host: str | None = Field(None, description="Host of a Chroma server ('chroma run').")
    port: int = Field(8000, ge=1, le=65535, description="Port of the Chroma server.")
    ssl: bool = Field(False, description="Talk HTTPS to the Chroma server.")
    headers: dict[str, SecretStr] = Field(
        default_factory=dict, description="HTTP headers sent to the server on every request "
        "(e.g. {\"Authorization\": \"Bearer ...\"}); kept secret in logs and responses.")
    tenant: str = Field("default_tenant", description="Chroma tenant.")
    database: str = Field("default_database", description="Chroma database.")
    create_database: bool = Field(
        True, description="Create the Chroma database at start-up if it does not exist.")
    collection_prefix: str = Field(
        "ragline_", description="Chroma collections of ragline are named <prefix><shard key>; "
        "collections without the prefix are never listed, touched or dropped, so ragline "
        "can share a Chroma database with other applications.")

    hnsw_ef: int = Field(
        256, ge=10, le=4096, description="HNSW ef_search of collections this store creates "
        "(Chroma's default is 100; BENCHMARKS.md compares it with the Edge store at 256). "
        "Set when a collection is created.")
    hnsw_ef_construction: int = Field(
        100, ge=10, le=4096, description="HNSW ef_construction of new collections.")
    hnsw_max_neighbors: int = Field(
        16, ge=4, le=256, description="HNSW max_neighbors (M) of new collections.")

    @field_validator("collection_prefix")
    @classmethod
    def _prefix_ok(cls, v: str) -> str:
        if not _PREFIX.match(v):
            raise ValueError("collection_prefix must start with a letter or digit and hold "
                             "only letters, digits, '.', '_' and '-' (at most 64)")
        return v

    @model_validator(mode="after")
    def _one_target(self) -> ChromaConfig:
        if (self.path is None) == (self.host is None):
            raise ValueError("give exactly one of 'path' (in-process) or 'host' (server)")
        return self

    @property
    def mode(self) -> str:
        return "persistent" if self.path is not None else "http"
