"""What the client commands share: connection options, output (rich tables or ``--json``)
and exit codes.

Exit codes (docs/cli.md):

* 0: done;
* 1: failed: the server or the store failed (5xx), the server could not be reached,
  a job failed, a threshold was missed;
* 2: refused: invalid arguments or request (400), no or a wrong key (401), not allowed
  (403), a conflict (409), too large (413), busy (429);
* 3: not found (404): no such collection, document, job or key.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table

from ragline.errors import RaglineError

F = TypeVar("F", bound=Callable[..., Any])

OK, FAILED, REFUSED, NOT_FOUND = 0, 1, 2, 3

Url = Annotated[str | None, typer.Option(
    envvar="RAGLINE_URL", help="Server to talk to (default: the server holding the data "
    "directory, else the directory itself).", rich_help_panel="Connection")]
ApiKey = Annotated[str | None, typer.Option(
    envvar="RAGLINE_API_KEY", help="API key for the server (default: the profile's, or "
    "the data directory's admin-key.txt).", show_default=False,
    rich_help_panel="Connection")]
AsTenant = Annotated[str | None, typer.Option(
    "--as-tenant", help="Act in this tenant (admin keys; '*': the shared corpus every "
    "reader of a collection sees).",
    rich_help_panel="Connection")]
Profile = Annotated[str | None, typer.Option(
    envvar="RAGLINE_PROFILE", help="Profile in ~/.config/ragline/profiles.toml "
    "(\\[profiles.NAME] url, api_key, tenant).", rich_help_panel="Connection")]
DataDir = Annotated[Path | None, typer.Option(
    help="Data directory when no server is used (default ./data).",
    rich_help_panel="Connection")]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON (the API's bodies) for "
                                      "scripts instead of tables.")]

err = Console(stderr=True)


def exit_code(exc: RaglineError) -> int:
    if exc.status == 404:
        return NOT_FOUND
    return REFUSED if 400 <= exc.status < 500 else FAILED


@contextmanager
def reported() -> Iterator[None]:
    """A RaglineError becomes one line on stderr and its exit code."""
    try:
        yield
    except RaglineError as exc:
        err.print(f"[red]error:[/red] {exc.message}", highlight=False, markup=True)
        raise typer.Exit(exit_code(exc)) from exc


def client_command(fn: F) -> F:
    """Give a command the connection options and a ``target`` (server or data directory).

    ``fn`` takes ``target`` and ``as_json`` (and ``settings``, the CLI's, if it names it)
    plus its own parameters; the wrapper adds
    ``--url --api-key --as-tenant --profile --data-dir`` and ``--json`` to its signature
    (so typer shows them), opens the target and reports errors with their exit codes.
    """
    from ragline.cli.target import Connection, open_target

    sig = inspect.signature(fn, eval_str=True)  # typer reads a set __signature__ as is
    own = [p for name, p in sig.parameters.items()
           if name not in ("target", "as_json", "settings")]
    wants_settings = "settings" in sig.parameters
    added = {"url": Url, "api_key": ApiKey, "as_tenant": AsTenant, "profile": Profile,
             "data_dir": DataDir, "as_json": AsJson}
    params = own + [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                                      default=False if name == "as_json" else None,
                                      annotation=annotation)
                    for name, annotation in added.items()]

    @functools.wraps(fn)
    def command(**kwargs: Any) -> Any:
        from ragline.cli.main import build_settings

        conn = Connection(kwargs.pop("url"), kwargs.pop("api_key"), kwargs.pop("as_tenant"),
                          kwargs.pop("profile"))
        data_dir = kwargs.pop("data_dir")
        with reported():
            settings = build_settings(data_dir)
            if wants_settings:
                kwargs["settings"] = settings
            with open_target(conn, settings) as target:
                return fn(target=target, **kwargs)

    hints = {**inspect.get_annotations(fn, eval_str=True), **added}
    hints.pop("target", None)
    hints.pop("settings", None)
    command.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
    command.__annotations__ = hints
    return command  # type: ignore[return-value]


def dump(value: Any) -> Any:
    """Models (and lists of them) as the API's JSON bodies."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True)
    if isinstance(value, list | tuple):
        return [dump(v) for v in value]
    return value


def emit_json(value: Any) -> None:
    typer.echo(json.dumps(dump(value), ensure_ascii=False))


def say(as_json: bool, value: Any, line: str) -> None:
    """``value`` as JSON for scripts, or ``line`` for people."""
    if as_json:
        emit_json(value)
    else:
        typer.echo(line)


def fit_widths(columns: Sequence[str], rows: Sequence[Sequence[str]],
               width: int) -> tuple[list[int], int]:
    """Column widths that fit ``width``, and the gap between columns (2, or 1 when that
    is what makes the table fit).

    Each column starts at its natural width and the column with the most room to give
    narrows first. A column goes no narrower than its header's longest word (headers
    are not cut mid-word) nor its longest word (up to 12 characters); a first column
    whose values all fit in 36 characters (ids people copy) is never cut. Only when
    even that does not fit are the widest columns cut further (their values fold).
    """
    natural = [max([len(h), *(len(r[i]) for r in rows)]) for i, h in enumerate(columns)]
    floor = [max([*(len(w) for w in h.split()),
                  min(max((len(w) for r in rows for w in r[i].split()), default=1), 12)])
             for i, h in enumerate(columns)]
    if columns and natural[0] <= 36:
        floor[0] = natural[0]
    widths = [max(n, 1) for n in natural]
    floor = [min(f, w) for f, w in zip(floor, widths, strict=True)]
    gap = 2 if sum(floor) + 2 * (len(columns) - 1) <= width else 1
    room = width - gap * (len(columns) - 1)
    while sum(widths) > room:
        slack = [w - f for w, f in zip(widths, floor, strict=True)]
        i = max(range(len(widths)), key=lambda k: (slack[k], widths[k]))
        if slack[i] <= 0:  # every column at its floor: cut the widest
            i = max(range(len(widths)), key=lambda k: widths[k])
            if widths[i] <= 1:
                break
        widths[i] -= 1
    return widths, gap


def when(stamp: str | None) -> str:
    """An ISO timestamp as a table shows it: ``2026-11-29 07:10`` (wraps at the space)."""
    return (stamp or "")[:16].replace("T", " ")


def fitted(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]],
           width: int) -> Table:
    """Rows as a table fitted to ``width`` columns (80 stay readable: see
    :func:`fit_widths`); long values wrap inside their column."""
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    widths, gap = fit_widths(columns, cells, width)
    t = Table(title=title, box=None, padding=(0, gap - 1, 0, 1) if gap == 2 else (0, 1, 0, 0),
              pad_edge=False, header_style="bold")
    for name, w in zip(columns, widths, strict=True):
        t.add_column(name, width=w, overflow="fold")
    for row in cells:
        t.add_row(*row)
    return t


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Rows as a table fitted to the terminal, on stdout."""
    console = Console()
    console.print(fitted(title, columns, rows, console.width))


def parse_json_option(value: str | None, name: str) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not JSON ({exc.msg})", param_hint=name) from exc
