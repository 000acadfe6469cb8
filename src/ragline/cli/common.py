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

    ``fn`` takes ``target`` and ``as_json`` plus its own parameters; the wrapper adds
    ``--url --api-key --as-tenant --profile --data-dir`` and ``--json`` to its signature
    (so typer shows them), opens the target and reports errors with their exit codes.
    """
    from ragline.cli.target import Connection, open_target

    sig = inspect.signature(fn, eval_str=True)  # typer reads a set __signature__ as is
    own = [p for name, p in sig.parameters.items() if name not in ("target", "as_json")]
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
            with open_target(conn, settings) as target:
                return fn(target=target, **kwargs)

    hints = {**inspect.get_annotations(fn, eval_str=True), **added}
    hints.pop("target", None)
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


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Rows as a rich table; the first column (the id people copy) is never cut."""
    t = Table(title=title)
    widest = max((len(str(r[0])) for r in rows), default=0)
    for i, name in enumerate(columns):
        if i == 0:
            t.add_column(name, no_wrap=True, min_width=min(widest, 40))
        else:
            t.add_column(name)
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    Console().print(t)


def parse_json_option(value: str | None, name: str) -> Any:
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"not JSON ({exc.msg})", param_hint=name) from exc
