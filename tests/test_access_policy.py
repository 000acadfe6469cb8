"""One access policy (issue 33 item 2): every use case of the facade, walked with an admin,
two users and a reader of another collection.

``kb`` is readable by tenants ``alice`` and ``bob`` (its ``tenants`` list) and holds a
shared corpus (tenant ``*``) and each user's own records; ``carol`` reads only ``other``.
Each row of :data:`TABLE` calls one public method of a door (``rl.collections``, ``rl.search``,
…; ``root.X``: of :class:`Ragline` itself) as each principal and
says what each must get: the records it may read (by their marker words), a refusal
(``Forbidden`` 403 or ``NotFound`` 404), or "allowed" (the access check passed; what the use
case then answers is its own tests' business). A public door method missing from the table (or
from :data:`NO_CALLER`, the methods that act for no caller) fails
:func:`test_every_door_method_is_in_the_table`.
"""

from __future__ import annotations

import inspect
import io
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from ragline.core.principal import Principal, Role
from ragline.errors import Forbidden, NotFound, RaglineError
from ragline.facade import (
    AnswerOptions,
    DocumentInput,
    Doors,
    IngestSource,
    Outgoing,
    Ragline,
    SearchRequest,
)
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
    rl.collections.create(owner, "kb", {"tenants": ["alice", "bob"]}, embed={"provider": "fake"})
    rl.collections.create(owner, "other", {"tenants": ["carol"]}, embed={"provider": "fake"})
    # where the rows that write go (kb stays as made, whatever order rows run in)
    rl.collections.create(owner, "team", {"tenants": ["alice", "bob"]},
                         embed={"provider": "fake"})
    star = Principal("*", Role.ADMIN, key_id="k-admin")
    w = World(rl, llm, tmp)
    for who, marker in ((star, "sharedbook"), (ALICE, "alicesecret"), (BOB, "bobsecret")):
        rl.documents.add(who, "kb", [DocumentInput(f"{marker} gripper notes", {"m": marker},
                                                   None, f"{marker}-doc")])
        out = rl.ingestion.submit(who, IngestSource("text", "kb", text=f"# {marker}\n\n{marker} "
                                          "gripper chapter", title=marker), wait=True)
        assert out.document is not None
        w.ids[marker] = out.document.source_id
    rl.documents.add(CAROL, "other", [DocumentInput("carolnote gripper", {"m": "carolnote"},
                                                    None, "carol-doc")])
    yield w
    rl.close()


def found(result: Any) -> set[str]:
    text = repr(result)
    return {m for m in MARKERS if m in text}


def search(req: dict[str, Any]) -> Call:
    return lambda rl, p, w: rl.search.query_sync(p, SearchRequest(collection="kb", limit=50, **req))


def scratch(rl: Ragline, name: str) -> str:
    """A collection only an admin's own calls change (destructive rows)."""
    if name not in {c.name for c in rl.collections.all(rl.owner())}:
        rl.collections.create(rl.owner(), name, embed={"provider": "fake"})
    return name


async def _chat(rl: Ragline, p: Principal) -> Any:
    return await rl.answers.chat(p, "gripper notes", collection="kb")


async def _chat_turn(rl: Ragline, p: Principal) -> Any:
    return await rl.answers.chat_turn(p, "gripper notes", collection="kb")


async def _checklist(rl: Ragline, p: Principal) -> Any:
    return await rl.answers.checklist(p, CTX, collection="kb")


async def _ingest_async(rl: Ragline, p: Principal) -> Any:
    return await rl.ingestion.submit_async(p, IngestSource("text", "team", text="new gripper text",
                                                 title=f"async-{p.tenant}"))


async def _completion_turn(rl: Ragline, p: Principal) -> Any:
    return await rl.answers.completion_turn(p, "ragline/kb", "gripper notes", [], AnswerOptions())


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
    "collections.create": (lambda rl, p, w: rl.collections.create(p, f"new-{p.tenant}"),
                          ADMIN_ONLY),
    "collections.all": (lambda rl, p, w: [c.name for c in rl.collections.all(p)
                                            if c.name in ("kb", "other")],
                         {"admin": {"kb", "other"}, "alice": {"kb"}, "bob": {"kb"},
                          "carol": {"other"}}),
    "collections.get": (lambda rl, p, w: rl.collections.get(p, "kb").count,
                       {"admin": 2, "alice": 4, "bob": 4, "carol": NotFound}),
    "collections.update_metadata": (lambda rl, p, w: rl.collections.update_metadata(
        p, scratch(rl, "meta"), {"a": 1}, True), ADMIN_ONLY),
    "collections.delete": (lambda rl, p, w: rl.collections.delete(
        p, scratch(rl, f"gone-{p.tenant}")), ADMIN_ONLY),
    "collections.empty": (lambda rl, p, w: rl.collections.empty(p, "team"), USERS_OF_KB),
    "collections.optimize": (lambda rl, p, w: rl.collections.optimize(p, "kb"), ADMIN_ONLY),
    # documents
    "documents.add": (lambda rl, p, w: rl.documents.add(p, "team", [DocumentInput(
        "added gripper", {}, None, f"added-{p.tenant}")]), USERS_OF_KB),
    "documents.page": (lambda rl, p, w: rl.documents.page(p, "kb", {"m": {"$ne": "x"}}),
                       READS),
    "documents.get": (lambda rl, p, w: [rl.documents.get(p, "kb", f"{m}-doc") for m in
                                       ("sharedbook", f"{p.tenant}secret")
                                       if m != "defaultsecret"], READS),
    "documents.delete": (lambda rl, p, w: rl.documents.delete(p, "kb", ids=[
        "sharedbook-doc", "nope"]), {"admin": 0, "alice": 0, "bob": 0, "carol": NotFound}),
    "documents.metadata_values": (lambda rl, p, w: rl.documents.metadata_values(p, "kb", "m"),
                                  READS),
    # sources
    "documents.sources": (lambda rl, p, w: [(w.marker_of(s.source_id), s.shared)
                                       for s in rl.documents.sources(p, "kb")[0]],
                     {"admin": [("sharedbook", True)],
                      "alice": [("alicesecret", False), ("sharedbook", True)],
                      "bob": [("bobsecret", False), ("sharedbook", True)],
                      "carol": NotFound}),
    "documents.source": (lambda rl, p, w: rl.documents.source(p, "kb", w.ids["sharedbook"]).shared,
                   {"admin": True, "alice": True, "bob": True, "carol": NotFound}),
    "documents.delete_source": (lambda rl, p, w: rl.documents.delete_source(p, "kb",
                                                                            w.ids["sharedbook"]),
                      {"admin": NotFound, "alice": NotFound, "bob": NotFound,
                       "carol": NotFound}),  # only an admin acting as '*' deletes it
    # search and reading around hits
    "search.query": (lambda rl, p, w: rl.call_sync(rl.search.query, p, SearchRequest(
        collection="kb", query="gripper", limit=50)), READS),
    "search.query_sync": (search({"query": "gripper", "mode": "sparse"}), READS),
    "search.context": (lambda rl, p, w: rl.search.context(p, "sharedbook-doc", "kb"),
                {"admin": {"sharedbook"}, "alice": {"sharedbook"}, "bob": {"sharedbook"},
                 "carol": NotFound}),
    "search.lesson": (lambda rl, p, w: rl.search.lesson(p, w.ids["sharedbook"], "kb"),
               {"admin": {"sharedbook"}, "alice": {"sharedbook"}, "bob": {"sharedbook"},
                "carol": NotFound}),
    "search.rerank": (lambda rl, p, w: rl.search.rerank(p, "q", []), ANYONE),
    # ingestion and jobs
    "ingestion.submit": (lambda rl, p, w: rl.ingestion.submit(p, IngestSource(
        "text", "team", text="more gripper text", title=f"more-{p.tenant}"), wait=True),
        USERS_OF_KB),
    "ingestion.submit_async": (lambda rl, p, w: rl.call_sync(_ingest_async, rl, p), USERS_OF_KB),
    "ingestion.job": (lambda rl, p, w: rl.ingestion.job(p, "no-such-job"),
            {"admin": NotFound, "alice": NotFound, "bob": NotFound, "carol": NotFound}),
    "ingestion.jobs": (lambda rl, p, w: rl.ingestion.jobs(p), ANYONE),
    "ingestion.wait": (lambda rl, p, w: rl.ingestion.wait(p, "no-such-job", 0.1),
                     {"admin": NotFound, "alice": NotFound, "bob": NotFound,
                      "carol": NotFound}),
    "ingestion.rerun": (lambda rl, p, w: rl.ingestion.rerun(p, "no-such-job"),
                  {"admin": NotFound, "alice": Forbidden, "bob": Forbidden,
                   "carol": Forbidden}),
    "ingestion.work": (lambda rl, p, w: rl.ingestion.work(p, exit_when_idle=True), ADMIN_ONLY),
    # keys
    "keys.create": (lambda rl, p, w: rl.keys.create(p, "user", "dave"), ADMIN_ONLY),
    "keys.all": (lambda rl, p, w: rl.keys.all(p), ADMIN_ONLY),
    "keys.revoke": (lambda rl, p, w: rl.keys.revoke(p, "no-such-key"),
                   {"admin": NotFound, "alice": Forbidden, "bob": Forbidden,
                    "carol": Forbidden}),
    # operations
    "admin.info": (lambda rl, p, w: {c["name"]: c["count"] for c in rl.admin.info(p)["collections"]
                               if c["name"] in ("kb", "other")},
             {"admin": {"kb": 2, "other": 0}, "alice": {"kb": 4}, "bob": {"kb": 4},
              "carol": {"other": 1}}),
    "admin.metrics": (lambda rl, p, w: rl.admin.metrics(p), ADMIN_ONLY),
    "admin.verify": (lambda rl, p, w: rl.admin.verify(p), ADMIN_ONLY),
    "admin.backup": (lambda rl, p, w: rl.admin.backup(p, w.tmp / f"bk-{p.tenant}"), ADMIN_ONLY),
    "admin.backup_archive": (lambda rl, p, w: rl.admin.backup_archive(p, w.tmp), ADMIN_ONLY),
    "admin.restore_catalog": (lambda rl, p, w: rl.admin.restore_catalog(p, w.tmp), ADMIN_ONLY),
    "admin.export": (lambda rl, p, w: rl.admin.export(p, io.StringIO()), ADMIN_ONLY),
    "admin.import_": (lambda rl, p, w: rl.admin.import_(p, []), ADMIN_ONLY),
    # connections and routing
    "connections.all": (lambda rl, p, w: rl.connections.all(p), ANYONE),
    "connections.add": (lambda rl, p, w: rl.connections.add(p, "c1", "nope", {}), ADMIN_ONLY),
    "connections.delete": (lambda rl, p, w: rl.connections.delete(p, "c1"),
                          {"admin": NotFound, "alice": Forbidden, "bob": Forbidden,
                           "carol": Forbidden}),
    "connections.test": (lambda rl, p, w: rl.connections.test(p, "nope", {}), ADMIN_ONLY),
    "connections.health": (lambda rl, p, w: rl.connections.health(p, "local"), ANYONE),
    "root.route": (lambda rl, p, w: rl.route(p, "local") is rl, ANYONE),
    "root.forward": (lambda rl, p, w: rl.call_sync(_forward, rl, p),
                {"admin": NotFound, "alice": NotFound, "bob": NotFound, "carol": NotFound}),
    # answers (chat, conversations, checklists, spec 003's library API)
    "answers.chat": (chat_call, READS),
    "answers.chat_turn": (lambda rl, p, w: rl.call_sync(_chat_turn, rl, p), USERS_OF_KB),
    # /v1 (issue 40): the models a caller may chat with, and a stateless turn
    "answers.completion_models": (lambda rl, p, w: {m for m, _ in rl.answers.completion_models(p)}
                          & {"ragline/kb", "ragline/other"},
                          {"admin": {"ragline/kb", "ragline/other"}, "alice": {"ragline/kb"},
                           "bob": {"ragline/kb"}, "carol": {"ragline/other"}}),
    "answers.completion_turn": (lambda rl, p, w: rl.call_sync(_completion_turn, rl, p),
                                USERS_OF_KB),
    # operational views (issue 32 item 4): only the collections the caller may read
    "admin.health": (lambda rl, p,
                     w: {c["name"] for c in rl.admin.health(p).get("collection_status", [])}
               & {"kb", "other"},
               {"admin": {"kb", "other"}, "alice": {"kb"}, "bob": {"kb"},
                "carol": {"other"}}),
    "answers.conversation": (lambda rl, p, w: rl.answers.conversation(p, "no-such"),
                         {"admin": NotFound, "alice": NotFound, "bob": NotFound,
                          "carol": NotFound}),
    "answers.delete_conversation": (lambda rl, p, w: rl.answers.delete_conversation(p, "no-such"),
                            {"admin": NotFound, "alice": NotFound, "bob": NotFound,
                             "carol": NotFound}),
    "answers.checklist": (lambda rl, p, w: rl.call_sync(_checklist, rl, p), USERS_OF_KB),
    "answers.embed": (lambda rl, p, w: rl.answers.embed(p, ["q"], collection="kb"),
                      USERS_OF_KB),
    "answers.embed_context": (lambda rl, p, w: rl.answers.embed_context(p, CTX, collection="kb"),
                              USERS_OF_KB),
    "answers.retrieve": (lambda rl, p, w: rl.answers.retrieve(p, CTX, 50, collection="kb"),
                         READS),
    "answers.process": (lambda rl, p, w: rl.answers.process(p, CTX, collection="kb"),
                        USERS_OF_KB),
}

# public methods that act for no caller (lifecycle, the server's own operations, pure helpers)
NO_CALLER = {
    "root.start", "root.close", "root.call_sync", "root.owner",
    "keys.authenticate",  # it makes the caller
    "keys.known",  # the request guard's cache probe: no caller before a key is checked
    "keys.ensure_first_admin", "admin.settle_pending",  # the server's own start-up steps
    "admin.format_versions", "connections.providers", "connections.provider_schema",
    "ingestion.upload_slot", "ingestion.stop_work",
    "ingestion.github_webhook",  # authenticated by its signature; acts in the configured tenant
    "answers.format_prompt", "answers.generate_checklist",  # pure: text in, text out
}


def public_methods(cls: type) -> set[str]:
    return {n for n, v in inspect.getmembers(cls) if not n.startswith("_") and callable(v)
            and not isinstance(inspect.getattr_static(cls, n), property)}


def door_methods() -> set[str]:
    """Every public method of the root (``root.X``) and of each door (``door.X``)."""
    doors = typing.get_type_hints(Doors)
    return {f"root.{m}" for m in public_methods(Ragline)} | {
        f"{door}.{m}" for door, cls in doors.items() for m in public_methods(cls)}


def test_every_door_method_is_in_the_table() -> None:
    public = door_methods()
    missing = public - set(TABLE) - NO_CALLER
    assert not missing, f"add these door methods to TABLE (or NO_CALLER): {sorted(missing)}"
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
    counts = world.rl.admin.export(ADMIN, io.StringIO())
    assert "*" in counts["tenants"] and counts["documents"]["kb"]["*"] == 2
    report = world.rl.admin.verify(ADMIN, collection="kb")
    assert report.sources == 3 and report.ok  # the shared text, alice's and bob's
