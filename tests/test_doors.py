"""The public surface, pinned (issue 35 items 1, 2, 3, 7): the package's exports, the root's
doors and each door's methods, the spec-003 adapter, and the composition root's rules.

A change here is a change to what callers (routes, CLI, MCP, the library, plugins) may
use: update the pin on purpose, with the docs (docs/architecture.md draws the doors).
"""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import ragline
import ragline.facade
from ragline.facade import Doors, Ragline
from ragline.library import Library
from ragline.wiring import Services

SRC = Path(ragline.__file__).parent

DOORS = {
    "collections": ["all", "create", "delete", "empty", "get", "optimize", "update_metadata"],
    "documents": ["add", "delete", "delete_source", "get", "metadata_values", "page", "source",
                  "sources"],
    "search": ["context", "lesson", "query", "query_sync", "rerank"],
    "ingestion": ["github_webhook", "job", "jobs", "rerun", "stop_work", "submit",
                  "submit_async", "upload_slot", "wait", "work"],
    "answers": ["chat", "chat_turn", "checklist", "completion_models", "completion_turn",
                "conversation", "delete_conversation", "embed", "embed_context",
                "format_prompt", "generate_checklist", "llm_configured", "process", "retrieve"],
    "keys": ["all", "authenticate", "create", "enabled", "ensure_first_admin", "known",
             "revoke"],
    "connections": ["add", "all", "delete", "health", "provider_schema", "providers", "test"],
    "admin": ["backup", "backup_archive", "export", "format_versions", "health", "import_",
              "info", "metrics", "restore_catalog", "settle_pending", "verify"],
}
ROOT = sorted([*DOORS, "call_sync", "close", "forward", "owner", "route", "services", "start",
               "started", "tenant"])


def surface(cls: type) -> list[str]:
    return sorted(n for n in dir(cls) if not n.startswith("_"))


def test_package_exports_are_pinned() -> None:
    assert ragline.__all__ == ["__version__"]  # the root is imported from ragline.facade
    assert sorted(ragline.facade.__all__) == [
        "AnswerOptions", "CollectionView", "DocumentInput", "Forwarded", "IngestOutcome",
        "IngestSource", "IngestStats", "Job", "KeyRecord", "Outgoing", "Principal", "Ragline",
        "SearchHit", "SearchRequest", "SearchResponse", "SourceDetail", "SourceInfo",
        "VerifyReport", "holder_address", "job_counters", "job_progress", "restore_backup",
        "tree_sources", "unpack_backup"]
    for name in ragline.facade.__all__:
        assert hasattr(ragline.facade, name), name


def test_the_root_is_small_and_opens_the_doors() -> None:
    assert surface(Ragline) == ROOT
    assert list(typing.get_type_hints(Doors)) == list(DOORS)


def test_each_door_surface_is_pinned() -> None:
    for door, cls in typing.get_type_hints(Doors).items():
        assert surface(cls) == DOORS[door], door


def test_the_library_adapter_has_spec_003s_names_only() -> None:
    assert surface(Library) == [
        "embed_context", "embed_text", "embed_texts", "find_similar", "format_prompt",
        "generate_checklist", "process", "retrieve", "store_batch", "store_chunk"]


def test_the_doors_and_the_root_stay_small() -> None:
    """facade.py is the root and the doors' assembly only; no door module is a lobby."""
    for path in [SRC / "facade.py", SRC / "wiring.py", SRC / "library.py",
                 *sorted((SRC / "doors").glob("*.py"))]:
        assert len(path.read_text().splitlines()) < 500, path.name


def test_the_composition_root_assigns_nothing_after_construction() -> None:
    """Dependencies go through constructors: no ``service.attr = ...`` in the composition
    root or the root (``self.x = ...`` in a constructor is the object's own state)."""
    offenders = []
    for path in [SRC / "facade.py", SRC / "wiring.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Assign):
                continue
            for t in node.targets:
                for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                    if isinstance(el, ast.Attribute) and not (
                            isinstance(el.value, ast.Name) and el.value.id == "self"):
                        offenders.append(f"{path.name}:{node.lineno}")
    assert offenders == []


def test_every_provider_slot_is_typed_by_its_protocol() -> None:
    hints = typing.get_type_hints(Services)
    assert all(h is not typing.Any for h in hints.values())
    assert "VectorStore" in str(hints["store"]) and "RerankerSlot" in str(hints["reranker"])
