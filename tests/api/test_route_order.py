"""The order routers are included in decides nothing but speed.

``create_app`` includes the collection routers (search and documents first) ahead of
the others, because every request is matched against the routes in order. That is
only safe while no request path can match routes of two different routers: then the
first full match is the same route whatever the order. This test builds request
paths from every route's template, with each parameter filled by a plain value and
by every literal segment of the app (``all``, ``search``, ``documents``...), and
checks that no path and method fully matches routes of two routers.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from starlette.routing import Match

from ragline.api.app import create_app
from ragline.settings import Settings

_PARAM = re.compile(r"\{[^}]+\}")


def _leaves(app: Any) -> Iterator[tuple[int, Any]]:
    """(index of the app-level route it belongs to, leaf route) for every endpoint."""

    def walk(route: Any) -> Iterator[Any]:
        if hasattr(route, "effective_candidates"):  # FastAPI's included router
            for child in [*route.effective_candidates(),
                          *route.effective_low_priority_routes()]:
                yield from walk(child)
        elif getattr(route, "endpoint", None) is not None and hasattr(route, "path"):
            yield route

    for i, top in enumerate(app.router.routes):
        for leaf in walk(top):
            yield i, leaf


def _paths(template: str, literals: list[str]) -> Iterator[str]:
    params = _PARAM.findall(template)
    for values in itertools.product(["x1", *literals], repeat=min(len(params), 2)):
        path = template
        for p, v in zip(params, [*values, *["x1"] * len(params)], strict=False):
            path = path.replace(p, "a/b" if p.endswith(":path}") else v, 1)
        yield path


def test_no_request_path_matches_routes_of_two_routers(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=tmp_path / "data", auth="off"))
    leaves = list(_leaves(app))
    assert len(leaves) > 50  # the walk reached the included routers' routes
    literals = sorted({seg for _, leaf in leaves for seg in leaf.path.split("/")
                       if seg and "{" not in seg})
    ambiguous = []
    for _, leaf in leaves:
        for path in _paths(leaf.path, literals):
            for method in sorted(getattr(leaf, "methods", None) or {"GET"}):
                scope = {"type": "http", "method": method, "path": path, "root_path": "",
                         "headers": [], "query_string": b""}
                owners = {i for i, other in leaves
                          if other.matches(scope)[0] == Match.FULL}
                if len(owners) > 1:
                    ambiguous.append((method, path, sorted(owners)))
    assert ambiguous == []


def test_the_search_route_is_matched_before_the_other_routers(tmp_path: Path) -> None:
    app = create_app(Settings(data_dir=tmp_path / "data", auth="off"))
    order = [leaf.path for _, leaf in _leaves(app)]
    search = order.index("/collections/{name}/search")
    assert search < order.index("/health") and search < order.index("/search")
    assert search < order.index("/api/collections/{name}/search")
