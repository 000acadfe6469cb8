"""Every built-in embedder, reranker and chat model passes its kind's conformance suite.

The suites live in ``ragline.testing`` (for plugin authors too); here each is run
once per built-in provider, built through the registry the way the server builds
it. The OpenAI-compatible providers talk to a real local HTTP server speaking
the protocol (``ragline.testing.fake_openai``); ``tests/llm`` runs the LLM suite
against a real llama.cpp server. A built-in without a factory here fails
``test_every_builtin_is_covered``, so a new provider cannot skip the suite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from ragline.providers.registry import registry
from ragline.testing.cross_encoder import tiny_cross_encoder_dir
from ragline.testing.embedder_conformance import EmbedderConformance
from ragline.testing.fake_openai import MODEL, FakeOpenAI, fake_openai_server
from ragline.testing.llm_conformance import LLMConformance
from ragline.testing.reranker_conformance import RerankerConformance
from ragline.testing.server import free_port

DEAD = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens here

# Built-ins covered elsewhere, and why (checked by test_every_builtin_is_covered).
ELSEWHERE = {
    ("rerankers", "ragline-remote"): "the remote-ragline client (issue 13 item 4, its own "
                                     "tests: graceful degradation instead of errors)",
    ("embedders", "gemini"): "tests/providers/embedders/test_gemini.py, against a local "
                             "server speaking Gemini's native batchEmbedContents (issue 37)",
}


def builtins(kind: str) -> set[str]:
    return {ep.name for ep in entry_points(group=f"ragline.{kind}")
            if ep.dist is not None and ep.dist.name == "ragline"}


@pytest.fixture(scope="module")
def openai_server() -> Iterator[FakeOpenAI]:
    with fake_openai_server() as server:
        yield server


@pytest.fixture(scope="module")
def models_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ragline.providers.rerankers.onnx_export import build_reranker

    root = tmp_path_factory.mktemp("models")
    build_reranker(str(tiny_cross_encoder_dir()), root)
    return root


# -- embedders ---------------------------------------------------------------------------
def _damaged_model(root: Path) -> str:
    """A model directory whose files are not a model (found, but cannot load)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "model.onnx").write_bytes(b"not onnx")
    (root / "tokenizer.json").write_text("{}")
    return str(root)


EMBEDDERS: dict[str, Callable[[Any, Path], tuple[dict[str, Any], dict[str, Any]]]] = {
    # name -> (working options, failing options), given the fake OpenAI server and a tmp dir
    "local": lambda _s, tmp: ({"model": "all-MiniLM-L6-v2"},
                              {"model": _damaged_model(tmp / "damaged")}),
    "openai": lambda s, _t: ({"base_url": s.url, "model": MODEL, "api_key": "sk-test"},
                             {"base_url": DEAD, "model": MODEL, "max_retries": 0, "timeout": 2}),
}


class TestEmbedders(EmbedderConformance):
    @pytest.fixture(scope="class", params=sorted(EMBEDDERS))
    def name(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)

    @pytest.fixture(scope="class")
    def provider(self, name: str, openai_server: FakeOpenAI,
                 tmp_path_factory: pytest.TempPathFactory) -> Any:
        options = EMBEDDERS[name](openai_server, tmp_path_factory.mktemp("emb"))[0]
        return registry.build("embedders", name, options)

    @pytest.fixture
    def broken(self, name: str, openai_server: FakeOpenAI, tmp_path: Path) -> Any:
        return registry.build("embedders", name, EMBEDDERS[name](openai_server, tmp_path)[1])


# -- rerankers ---------------------------------------------------------------------------
def _broken_reranker(reranker: Any) -> Any:
    """A loaded reranker whose model then fails (health must notice, not raise)."""
    def fail(*_a: Any, **_k: Any) -> Any:
        raise RuntimeError("model crashed")

    for attr in ("_model", "_session"):
        inner = getattr(reranker, attr, None)
        if inner is not None:
            for method in ("predict", "run"):
                if hasattr(inner, method):
                    setattr(reranker, attr, type("Broken", (), {method: staticmethod(fail)})())
    return reranker


RERANKERS: dict[str, Callable[[Path], dict[str, Any]]] = {
    "cross-encoder": lambda _m: {"model": str(tiny_cross_encoder_dir()),
                                 "local_files_only": True},
    "onnx-cross-encoder": lambda m: {"model": str(tiny_cross_encoder_dir()), "models_dir": m},
}


class TestRerankers(RerankerConformance):
    @pytest.fixture(scope="class", params=sorted(RERANKERS))
    def name(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)

    @pytest.fixture(scope="class")
    def provider(self, name: str, models_dir: Path) -> Any:
        return registry.build("rerankers", name, RERANKERS[name](models_dir))

    @pytest.fixture
    def broken(self, name: str, models_dir: Path) -> Any:
        return _broken_reranker(registry.build("rerankers", name, RERANKERS[name](models_dir)))


# -- chat models -------------------------------------------------------------------------
LLMS: dict[str, Callable[[Any], tuple[dict[str, Any], dict[str, Any]]]] = {
    "openai": lambda s: ({"base_url": s.url, "model": MODEL, "api_key": "sk-test"},
                         {"base_url": DEAD, "model": MODEL, "max_retries": 0}),
}


class TestChatModels(LLMConformance):
    @pytest.fixture(params=sorted(LLMS))
    def name(self, request: pytest.FixtureRequest) -> str:
        return str(request.param)

    @pytest.fixture
    def provider(self, name: str, openai_server: FakeOpenAI) -> Any:
        return registry.build("llms", name, LLMS[name](openai_server)[0])

    @pytest.fixture
    def broken(self, name: str, openai_server: FakeOpenAI) -> Any:
        return registry.build("llms", name, LLMS[name](openai_server)[1])


def test_every_builtin_is_covered() -> None:
    """A new built-in must be added to a suite here (or say where it is covered)."""
    for kind, covered in (("embedders", EMBEDDERS), ("rerankers", RERANKERS), ("llms", LLMS)):
        missing = builtins(kind) - set(covered) - {n for k, n in ELSEWHERE if k == kind}
        assert not missing, f"{kind} without a conformance run: {missing}"
