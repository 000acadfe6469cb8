"""One access policy (issue 33 item 2): every use case of the facade, walked with an admin,
two users and a reader of another collection.

``kb`` is readable by tenants ``alice`` and ``bob`` (its ``tenants`` list) and holds a
shared corpus (tenant ``*``) and each user's own records; ``carol`` reads only ``other``.
Each row of :data:`TABLE` calls one public method of :class:`Ragline` as each principal and
says what each must get: the records it may read (by their marker words), a refusal
(``Forbidden`` 403 or ``NotFound`` 404), or "allowed" (the access check passed; what the use
case then answers is its own tests' business). A public method missing from the table (or
from :data:`NO_CALLER`, the methods that act for no caller) fails
:func:`test_every_public_facade_method_is_in_the_table`.
"""

from __future__ import annotations

import inspect
import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ragline.core.principal import Principal, Role
from ragline.errors import Forbidden, NotFound, RaglineError
from ragline.facade import DocumentInput, IngestSource, Outgoing, Ragline, SearchRequest
from ragline.facade_answers import AnswerOptions
from ragline.testing.scripted_llm import ScriptedChatModel
from tests.ingestion_support import fake_settings

ADMIN = Principal("default", Role.ADMIN, key_id="k-admin", all_tenants=True)
ALICE = Principal("alice", key_id="k-alice")
BOB = Principal("bob", key_id="k-bob")
CAROL = Principal("carol", key_id="k-carol")  # reads only the collection "other"
WHO = {"admin": ADMIN, "alice": ALICE, "bob": BOB, "carol": CAROL}
MARKERS = ("sharedbook", "alicesecret", "bobsecret", "carolnote")

# what each principal reads of kb through a reading use case
READS = {"admin": {"sharedbook"}, "alice": {"sharedbook", "alicesecret"},
         "bob": {"sharedbook", "bobsecret"}, "carol": NotFound}
ADMIN_ONLY = {"admin": "allowed", "alice": Forbidden, "bob": Forbidden, "carol": Forbidden}
USERS_OF_KB = {"admin": "allowed", "alice": "allowed", "bob": "allowed", "carol": NotFound}
ANYONE = {"admin": "allowed", "alice": "allowed", "bob": "allowed", "carol": "allowed"}

Call = Callable[[Ragline, Principal, "World"], Any]


class World:
    def __init__(self, rl: Ragline, llm: ScriptedChatModel, tmp: Path) -> None:
        self.rl, self.llm, self.tmp = rl, llm, tmp
        self.ids: dict[str, str] = {}  # marker -> the source id of its ingested text

    def marker_of(self, source_id: str) -> str:
        return next((m for m, s in self.ids.items() if s == source_id), source_id)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    tmp = tmp_path_factory.mktemp("access")
    llm = ScriptedChatModel()
    rl = Ragline(fake_settings(tmp, default_collection="kb"), llm=llm).start()
    owner = rl.owner()
    rl.create_collection(owner, "kb", {"tenants": ["alice", "bob"]}, embed={"provider": "fake"})
    rl.create_collection(owner, "other", {"tenants": ["carol"]}, embed={"provider": "fake"})
    # where the rows that write go (kb stays as made, whatever order rows run in)
    rl.create_collection(owner, "team", {"tenants": ["alice", "bob"]},
                         embed={"provider": "fake"})
    star = Principal("*", Role.ADMIN, key_id="k-admin")
    w = World(rl, llm, tmp)
    for who, marker in ((star, "sharedbook"), (ALICE, "alicesecret"), (BOB, "bobsecret")):
        rl.add_documents(who, "kb", [DocumentInput(f"{marker} gripper notes", {"m": marker},
                                                   None, f"{marker}-doc")])
        out = rl.ingest(who, IngestSource("text", "kb", text=f"# {marker}\n\n{marker} "
                                          "gripper chapter", title=marker), wait=True)
        assert out.document is not None
        w.ids[marker] = out.document.source_id
    rl.add_documents(CAROL, "other", [DocumentInput("carolnote gripper", {"m": "carolnote"},
                                                    None, "carol-doc")])
    yield w
    rl.close()


def found(result: Any) -> set[str]:
    text = repr(result)
    return {m for m in MARKERS if m in text}


def search(req: dict[str, Any]) -> Call:
    return lambda rl, p, w: rl.search_sync(p, SearchRequest(collection="kb", limit=50, **req))


def scratch(rl: Ragline, name: str) -> str:
    """A collection only an admin's own calls change (destructive rows)."""
    if name not in {c.name for c in rl.list_collections(rl.owner())}:
        rl.create_collection(rl.owner(), name, embed={"provider": "fake"})
    return name


async def _chat(rl: Ragline, p: Principal) -> Any:
    return await rl.chat(p, "gripper notes", collection="kb")


async def _chat_turn(rl: Ragline, p: Principal) -> Any:
    return await rl.chat_turn(p, "gripper notes", collection="kb")


async def _checklist(rl: Ragline, p: Principal) -> Any:
    return await rl.checklist(p, CTX, collection="kb")


async def _ingest_async(rl: Ragline, p: Principal) -> Any:
    return await rl.ingest_async(p, IngestSource("text", "team", text="new gripper text",
                                                 title=f"async-{p.tenant}"))


async def _completion_turn(rl: Ragline, p: Principal) -> Any:
    return await rl.completion_turn(p, "ragline/kb", "gripper notes", [], AnswerOptions())


async def _forward(rl: Ragline, p: Principal) -> Any:
    return await rl.forward(p, "nowhere", Outgoing("GET", "/collections", [], b""))


def chat_call(rl: Ragline, p: Principal, w: World) -> Any:
    w.llm.replies += ['{"tool_name": "none"}', "An answer."]
    rl.call_sync(_chat, rl, p)
    return w.llm.calls[-1].prompt


CTX = {"title": "gripper notes"}

# method -> (call, expected per principal)
TABLE: dict[str, tuple[Call, dict[str, Any]]] = {
    # collections
    "create_collection": (lambda rl, p, w: rl.create_collection(p, f"new-{p.tenant}"),
                          ADMIN_ONLY),
    "list_collections": (lambda rl, p, w: [c.name for c in rl.list_collections(p)
                                            if c.name in ("kb", "other")],
                         {"admin": {"kb", "other"}, "alice": {"kb"}, "bob": {"kb"},
                          "carol": {"other"}}),
    "get_collection": (lambda rl, p, w: rl.get_collection(p, "kb").count,
                       {"admin": 2, "alice": 4, "bob": 4, "carol": NotFound}),
    "update_collection_metadata": (lambda rl, p, w: rl.update_collection_metadata(
        p, scratch(rl, "meta"), {"a": 1}, True), ADMIN_ONLY),
    "delete_collection": (lambda rl, p, w: rl.delete_collection(
        p, scratch(rl, f"gone-{p.tenant}")), ADMIN_ONLY),
    "empty_collection": (lambda rl, p, w: rl.empty_collection(p, "team"), USERS_OF_KB),
    "optimize_collection": (lambda rl, p, w: rl.optimize_collection(p, "kb"), ADMIN_ONLY),
    # documents
    "add_documents": (lambda rl, p, w: rl.add_documents(p, "team", [DocumentInput(
        "added gripper", {}, None, f"added-{p.tenant}")]), USERS_OF_KB),
    "list_documents": (lambda rl, p, w: rl.list_documents(p, "kb", {"m": {"$ne": "x"}}),
                       READS),
    "get_document": (lambda rl, p, w: [rl.get_document(p, "kb", f"{m}-doc") for m in
                                       ("sharedbook", f"{p.tenant}secret")
                                       if m != "defaultsecret"], READS),
    "delete_documents": (lambda rl, p, w: rl.delete_documents(p, "kb", ids=[
        "sharedbook-doc", "nope"]), {"admin": 0, "alice": 0, "bob": 0, "carol": NotFound}),
    "metadata_values": (lambda rl, p, w: rl.metadata_values(p, "kb", "m"), READS),
    # sources
    "list_sources": (lambda rl, p, w: [(w.marker_of(s.source_id), s.shared)
                                       for s in rl.list_sources(p, "kb")[0]],
                     {"admin": [("sharedbook", True)],
                      "alice": [("alicesecret", False), ("sharedbook", True)],
                      "bob": [("bobsecret", False), ("sharedbook", True)],
                      "carol": NotFound}),
    "get_source": (lambda rl, p, w: rl.get_source(p, "kb", w.ids["sharedbook"]).shared,
                   {"admin": True, "alice": True, "bob": True, "carol": NotFound}),
    "delete_source": (lambda rl, p, w: rl.delete_source(p, "kb", w.ids["sharedbook"]),
                      {"admin": NotFound, "alice": NotFound, "bob": NotFound,
                       "carol": NotFound}),  # only an admin acting as '*' deletes it
    # search and reading around hits
    "search": (lambda rl, p, w: rl.call_sync(rl.search, p, SearchRequest(
        collection="kb", query="gripper", limit=50)), READS),
    "search_sync": (search({"query": "gripper", "mode": "sparse"}), READS),
    "context": (lambda rl, p, w: rl.context(p, "sharedbook-doc", "kb"),
                {"admin": {"sharedbook"}, "alice": {"sharedbook"}, "bob": {"sharedbook"},
                 "carol": NotFound}),
    "lesson": (lambda rl, p, w: rl.lesson(p, w.ids["sharedbook"], "kb"),
               {"admin": {"sharedbook"}, "alice": {"sharedbook"}, "bob": {"sharedbook"},
                "carol": NotFound}),
    "rerank": (lambda rl, p, w: rl.rerank(p, "q", []), ANYONE),
    # ingestion and jobs
    "ingest": (lambda rl, p, w: rl.ingest(p, IngestSource(
        "text", "team", text="more gripper text", title=f"more-{p.tenant}"), wait=True),
        USERS_OF_KB),
    "ingest_async": (lambda rl, p, w: rl.call_sync(_ingest_async, rl, p), USERS_OF_KB),
    "job": (lambda rl, p, w: rl.job(p, "no-such-job"),
            {"admin": NotFound, "alice": NotFound, "bob": NotFound, "carol": NotFound}),
    "jobs": (lambda rl, p, w: rl.jobs(p), ANYONE),
    "wait_for_job": (lambda rl, p, w: rl.wait_for_job(p, "no-such-job", 0.1),
                     {"admin": NotFound, "alice": NotFound, "bob": NotFound,
                      "carol": NotFound}),
    "rerun_job": (lambda rl, p, w: rl.rerun_job(p, "no-such-job"),
                  {"admin": NotFound, "alice": Forbidden, "bob": Forbidden,
                   "carol": Forbidden}),
    "work": (lambda rl, p, w: rl.work(p, exit_when_idle=True), ADMIN_ONLY),
    # keys
    "create_key": (lambda rl, p, w: rl.create_key(p, "user", "dave"), ADMIN_ONLY),
    "list_keys": (lambda rl, p, w: rl.list_keys(p), ADMIN_ONLY),
    "revoke_key": (lambda rl, p, w: rl.revoke_key(p, "no-such-key"),
                   {"admin": NotFound, "alice": Forbidden, "bob": Forbidden,
                    "carol": Forbidden}),
    # operations
    "info": (lambda rl, p, w: {c["name"]: c["count"] for c in rl.info(p)["collections"]
                               if c["name"] in ("kb", "other")},
             {"admin": {"kb": 2, "other": 0}, "alice": {"kb": 4}, "bob": {"kb": 4},
              "carol": {"other": 1}}),
    "metrics": (lambda rl, p, w: rl.metrics(p), ADMIN_ONLY),
    "verify": (lambda rl, p, w: rl.verify(p), ADMIN_ONLY),
    "backup": (lambda rl, p, w: rl.backup(p, w.tmp / f"bk-{p.tenant}"), ADMIN_ONLY),
    "backup_archive": (lambda rl, p, w: rl.backup_archive(p, w.tmp), ADMIN_ONLY),
    "restore_catalog": (lambda rl, p, w: rl.restore_catalog(p, w.tmp), ADMIN_ONLY),
    "export_data": (lambda rl, p, w: rl.export_data(p, io.StringIO()), ADMIN_ONLY),
    "import_data": (lambda rl, p, w: rl.import_data(p, []), ADMIN_ONLY),
    # connections and routing
    "list_connections": (lambda rl, p, w: rl.list_connections(p), ANYONE),
    "add_connection": (lambda rl, p, w: rl.add_connection(p, "c1", "nope", {}), ADMIN_ONLY),
    "delete_connection": (lambda rl, p, w: rl.delete_connection(p, "c1"),
                          {"admin": NotFound, "alice": Forbidden, "bob": Forbidden,
                           "carol": Forbidden}),
    "test_connection": (lambda rl, p, w: rl.test_connection(p, "nope", {}), ADMIN_ONLY),
    "connection_health": (lambda rl, p, w: rl.connection_health(p, "local"), ANYONE),
    "route": (lambda rl, p, w: rl.route(p, "local") is rl, ANYONE),
    "forward": (lambda rl, p, w: rl.call_sync(_forward, rl, p),
                {"admin": NotFound, "alice": NotFound, "bob": NotFound, "carol": NotFound}),
    # answers (chat, conversations, checklists, spec 003's library API)
    "chat": (chat_call, READS),
    "chat_turn": (lambda rl, p, w: rl.call_sync(_chat_turn, rl, p), USERS_OF_KB),
    # /v1 (issue 40): the models a caller may chat with, and a stateless turn
    "completion_models": (lambda rl, p, w: {m for m, _ in rl.completion_models(p)}
                          & {"ragline/kb", "ragline/other"},
                          {"admin": {"ragline/kb", "ragline/other"}, "alice": {"ragline/kb"},
                           "bob": {"ragline/kb"}, "carol": {"ragline/other"}}),
    "completion_turn": (lambda rl, p, w: rl.call_sync(_completion_turn, rl, p), USERS_OF_KB),
    # operational views (issue 32 item 4): only the collections the caller may read
    "health": (lambda rl, p, w: {c["name"] for c in rl.health(p).get("collection_status", [])}
               & {"kb", "other"},
               {"admin": {"kb", "other"}, "alice": {"kb"}, "bob": {"kb"},
                "carol": {"other"}}),
    "get_conversation": (lambda rl, p, w: rl.get_conversation(p, "no-such"),
                         {"admin": NotFound, "alice": NotFound, "bob": NotFound,
                          "carol": NotFound}),
    "delete_conversation": (lambda rl, p, w: rl.delete_conversation(p, "no-such"),
                            {"admin": NotFound, "alice": NotFound, "bob": NotFound,
                             "carol": NotFound}),
    "checklist": (lambda rl, p, w: rl.call_sync(_checklist, rl, p), USERS_OF_KB),
    "embed_text": (lambda rl, p, w: rl.embed_text("q", collection="kb", caller=p),
                   USERS_OF_KB),
    "embed_texts": (lambda rl, p, w: rl.embed_texts(["q"], collection="kb", caller=p),
                    USERS_OF_KB),
    "embed_context": (lambda rl, p, w: rl.embed_context(CTX, collection="kb", caller=p),
                      USERS_OF_KB),
    "store_chunk": (lambda rl, p, w: rl.store_chunk("team", {"text": "chunk gripper"},
                                                    caller=p), USERS_OF_KB),
    "store_batch": (lambda rl, p, w: rl.store_batch("team", [{"text": "batch gripper"}],
                                                    caller=p), USERS_OF_KB),
    "find_similar": (lambda rl, p, w: rl.find_similar(
        rl.embed_text("sharedbook gripper notes", collection="kb"), 50, collection="kb",
        caller=p), READS),
    "retrieve": (lambda rl, p, w: rl.retrieve(CTX, 50, collection="kb", caller=p), READS),
    "process": (lambda rl, p, w: rl.process(CTX, collection="kb", caller=p), USERS_OF_KB),
}

# public methods that act for no caller (lifecycle, the server's own operations, pure helpers)
NO_CALLER = {
    "start", "close", "call_sync", "owner", "authenticate", "ensure_admin_key",
    "settle_pending",  # the server's own start-up repair
    "key_known",  # the request guard's cache probe: no caller before a key is checked
    "format_versions", "providers", "provider_schema", "upload_slot", "stop_work",
    "github_webhook",  # authenticated by its signature; acts in the configured tenant
    "format_prompt", "generate_checklist",  # pure: text in, text out
}


def test_every_public_facade_method_is_in_the_table() -> None:
    public = {n for n, v in inspect.getmembers(Ragline) if not n.startswith("_")
              and callable(v) and not isinstance(inspect.getattr_static(Ragline, n),
                                                 property)}
    missing = public - set(TABLE) - NO_CALLER
    assert not missing, f"add these facade methods to TABLE (or NO_CALLER): {sorted(missing)}"
    assert not (set(TABLE) | NO_CALLER) - public  # nothing stale either


@pytest.mark.parametrize("method", sorted(TABLE))
def test_each_use_case_applies_the_policy(world: World, method: str) -> None:
    call, expected = TABLE[method]
    for who in ("admin", "alice", "bob", "carol"):
        want, p = expected[who], WHO[who]
        if isinstance(want, type) and issubclass(want, RaglineError):
            with pytest.raises(want):
                call(world.rl, p, world)
            continue
        try:
            got = call(world.rl, p, world)
        except (Forbidden, NotFound) as exc:
            pytest.fail(f"{method} as {who}: refused ({exc!r}), expected {want!r}")
        except RaglineError:
            if want == "allowed":  # the policy let it through; the use case said no
                continue
            raise
        if want == "allowed":
            continue
        if isinstance(want, set) and want <= set(MARKERS):  # the records it read
            assert found(got) == want, (method, who, got)
        elif isinstance(want, set):
            assert set(got) == want, (method, who, got)
        else:
            assert got == want, (method, who, got)


def test_export_and_verify_cover_the_shared_corpus(world: World) -> None:
    """The shared corpus is a tenant of its own for the admin's whole-setup operations."""
    counts = world.rl.export_data(ADMIN, io.StringIO())
    assert "*" in counts["tenants"] and counts["documents"]["kb"]["*"] == 2
    report = world.rl.verify(ADMIN, collection="kb")
    assert report.sources == 3 and report.ok  # the shared text, alice's and bob's
