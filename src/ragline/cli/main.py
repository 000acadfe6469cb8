"""The ``ragline`` command line: ``serve`` and the commands that act on a server or, with
none running, on the data directory (docs/cli.md).

Settings are built here, once, from the environment plus the flags given.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ragline.cli import options
from ragline.settings import Settings

if TYPE_CHECKING:
    import uvicorn
    from fastapi import FastAPI

app = typer.Typer(help="ragline: a self-hosted RAG backend.", no_args_is_help=True,
                  pretty_exceptions_enable=False)


def _flags_take_no_value() -> None:
    """typer prints a type after every option in ``--help``, flags included (``--json
    <bool>``), which reads as if the flag took a value; flags show none."""
    from typer.core import TyperOption

    if getattr(TyperOption, "_ragline_flags", False):
        return
    shown = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx: Any) -> str | None:
        return None if self.is_flag else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]
    TyperOption._ragline_flags = True  # type: ignore[attr-defined]


_flags_take_no_value()

log = logging.getLogger("ragline")


def _register_subcommands() -> None:
    from ragline.cli.backup_cmd import backup, restore
    from ragline.cli.collections_cmd import collections_app
    from ragline.cli.config_cmd import config_app
    from ragline.cli.documents_cmd import documents_app
    from ragline.cli.eval_answers_cmd import register as register_eval_answers
    from ragline.cli.eval_cmd import eval_app
    from ragline.cli.ingest_cmd import ingest
    from ragline.cli.jobs_cmd import jobs_app
    from ragline.cli.keys_cmd import keys_app
    from ragline.cli.mcp_cmd import mcp
    from ragline.cli.models_cmd import models_app
    from ragline.cli.search_cmd import search
    from ragline.cli.sources_cmd import sources_app
    from ragline.cli.transfer_cmd import export, import_
    from ragline.cli.verify_cmd import verify
    from ragline.cli.worker_cmd import worker

    app.add_typer(collections_app, name="collections")
    app.add_typer(documents_app, name="documents")
    app.command("search")(search)
    app.add_typer(jobs_app, name="jobs")
    register_eval_answers(eval_app)
    app.add_typer(eval_app, name="eval")
    app.add_typer(keys_app, name="keys")
    app.add_typer(models_app, name="models")
    app.add_typer(config_app, name="config")
    app.add_typer(sources_app, name="sources")
    app.command("backup")(backup)
    app.command("restore")(restore)
    app.command("ingest")(ingest)
    app.command("mcp")(mcp)
    app.command("verify")(verify)
    app.command("worker")(worker)
    app.command("export")(export)
    app.command("import")(import_)


def _cross_encoder_help() -> str:
    from ragline.models import reranker_help

    return reranker_help()


def _version(value: bool) -> None:
    if value:
        from ragline import __version__

        typer.echo(f"ragline {__version__}")
        raise typer.Exit(0)


@app.callback()
def _global_options(
    config: Annotated[Path | None, typer.Option(
        "--config", help="TOML settings file (default: $RAGLINE_CONFIG or ./ragline.toml). "
        "Precedence: flags > environment > file > defaults.")] = None,
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version and exit.")]
    = False,
) -> None:
    options.config_file = config


def build_settings(data_dir: Path | None = None, **overrides: object) -> Settings:
    """Settings from flags > env > TOML file > defaults; a bad value exits 2 naming the key."""
    from ragline.errors import ConfigError
    from ragline.settings import load_settings

    values = {k: v for k, v in overrides.items() if v is not None}
    if data_dir is not None:
        values["data_dir"] = data_dir
    try:
        return load_settings(options.config_file, **values)
    except ConfigError as exc:
        typer.echo(f"Invalid configuration: {exc.message}", err=True)
        raise typer.Exit(2) from exc


@app.command()
def serve(
    host: Annotated[str | None, typer.Option(
        help="Interface to listen on (default 127.0.0.1).")] = None,
    port: Annotated[int | None, typer.Option(help="TCP port (default 8000).")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (default ./data).")] = None,
    cross_encoder: Annotated[str | None, typer.Option(
        "--cross-encoder", help=_cross_encoder_help())] = None,
    cross_encoder_path: Annotated[Path | None, typer.Option(
        "--cross-encoder-path", help="Local directory of a cross-encoder; no hub access.")] = None,
    list_reranker_models: Annotated[bool, typer.Option(
        "--list-reranker-models", help="Print recommended cross-encoders and exit.")] = False,
    log_level: Annotated[str | None, typer.Option(
        help="debug, info, warning or error (default info).")] = None,
    log_format: Annotated[str | None, typer.Option(
        help="text or json (one JSON object per line, with request ids).")] = None,
    max_connections: Annotated[int | None, typer.Option(
        metavar="N",
        help="Open connections served at once (default: setting http_max_connections).")] = None,
    header_timeout: Annotated[float | None, typer.Option(
        metavar="S", help="Seconds a client has to send its request headers.")] = None,
    body_timeout: Annotated[float | None, typer.Option(
        metavar="S", help="Longest pause in a request body, in seconds.")] = None,
    request_timeout: Annotated[float | None, typer.Option(
        metavar="S", help="Seconds a client has to send a whole request (headers and "
        "body).")] = None,
    allowed_host: Annotated[list[str] | None, typer.Option(
        "--allowed-host", metavar="HOST",
        help="Host name the API answers to (repeat; '*' = any).")] = None,
    cors_origin: Annotated[list[str] | None, typer.Option(
        "--cors-origin", metavar="URL",
        help="Origin allowed by CORS (repeat; default: CORS off).")] = None,
    workers: Annotated[int, typer.Option(
        metavar="N", help="API processes on the one port (N > 1 needs "
        "RAGLINE_CATALOG=postgres and a server store; docs/scaling.md).")] = 1,
) -> None:
    """Serve the HTTP API (embedded store, nothing else to start)."""
    if list_reranker_models:
        from ragline.models import reranker_list

        typer.echo(reranker_list())
        raise typer.Exit(0)
    settings = build_settings(data_dir, host=host, port=port, log_level=log_level,
                              log_format=log_format, cross_encoder_model=cross_encoder,
                              cross_encoder_path=cross_encoder_path,
                              http_max_connections=max_connections,
                              http_header_timeout_s=header_timeout,
                              http_body_timeout_s=body_timeout,
                              http_request_timeout_s=request_timeout,
                              allowed_hosts=allowed_host or None,
                              cors_origins=cors_origin or None)
    from ragline.observability.logs import configure_logging

    configure_logging(settings.log_level, settings.log_format)
    host, port = settings.host, settings.port
    import uvicorn

    from ragline.api.app import create_app
    from ragline.facade import Ragline

    if settings.auth == "off":
        if not _loopback(host) and not settings.auth_off_i_understand:
            typer.echo(f"refusing to serve {host} with RAGLINE_AUTH=off: anyone who can reach "
                       "the port could read and delete everything. Bind 127.0.0.1, turn auth "
                       "on, or set RAGLINE_AUTH_OFF_I_UNDERSTAND=1.", err=True)
            raise typer.Exit(1)
        log.warning("RAGLINE_AUTH=off: every caller is an admin of the default tenant")
    if workers < 1:
        typer.echo("--workers must be at least 1", err=True)
        raise typer.Exit(2)
    if workers > 1 and not settings.shared_catalog:
        typer.echo("--workers N > 1 needs a catalog the processes share: set "
                   "RAGLINE_CATALOG=postgres and a server store (docs/scaling.md)", err=True)
        raise typer.Exit(2)
    rl = Ragline(settings)
    rl.address = f"http://{host}:{port}"
    try:
        rl.start()  # lock, recovery and model loading before the port opens
        first_key = rl.keys.ensure_first_admin()
    except Exception as exc:
        log.critical("start-up failed: %s", exc)
        raise typer.Exit(1) from exc
    api = create_app(ragline=rl)
    _banner(rl, host, port, first_key, api)
    raise_fd_limit(settings.http_max_connections + FD_HEADROOM)  # worker processes inherit it
    if workers > 1:  # the API processes open their own Ragline; this one was the check
        rl.close()
        from ragline.cli.serve_workers import serve_processes

        raise typer.Exit(serve_processes(settings, workers))
    from ragline.observability.memory import tune_gc_for_serving

    tune_gc_for_serving(settings.gc_gen0_threshold)
    try:
        uvicorn.Server(uvicorn_config(api, settings)).run()
    finally:
        rl.close()


def uvicorn_config(api: FastAPI, settings: Settings) -> uvicorn.Config:
    """The server's uvicorn settings (one process or each of N).

    log_config=None: uvicorn logs through ours (request ids, JSON); its access log is
    replaced by ragline.access (route templates, request ids). Deadlines and a
    connection cap: a peer that connects and sends nothing (or a byte at a time) must
    not hold a descriptor forever. No ``limit_concurrency``: at the cap uvicorn would
    answer 503 to the newcomer, where the protocol closes the connection that waited
    longest instead (api/http_protocol.py)."""
    import uvicorn

    from ragline.api.http_protocol import protocol_class

    return uvicorn.Config(api, host=settings.host, port=settings.port,
                          log_level=settings.log_level, log_config=None, access_log=False,
                          http=protocol_class(settings.http_header_timeout_s,
                                              settings.http_body_timeout_s,
                                              settings.http_max_connections,
                                              settings.http_request_timeout_s),
                          timeout_keep_alive=settings.http_timeout_keep_alive_s)


FD_HEADROOM = 1024
"""Descriptors kept for the process's own files (shards, models, catalog) past the
connection cap."""


def raise_fd_limit(need: int) -> int:
    """Raise the soft limit on open descriptors towards ``need`` (never past the hard
    limit, never lowering it), so the connection cap is reached before the descriptors
    run out; returns the soft limit in force."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            return target
        except (ValueError, OSError):
            log.warning("could not raise the open-file limit from %d to %d", soft, target)
    return soft


def _loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _banner(rl: object, host: str, port: int, first_key: str | None, api: object) -> None:
    """What a person starting the server needs to know, on stderr, once
    (rendered by ragline.cli.banner)."""
    from fastapi import FastAPI

    from ragline import __version__
    from ragline.api.docs_ui import has_console
    from ragline.cli.banner import BannerFacts, write
    from ragline.facade import Ragline

    assert isinstance(rl, Ragline) and isinstance(api, FastAPI)
    s = rl.settings
    auth = "on (API keys required)" if s.auth == "on" else \
        "OFF (every caller is an admin of the default tenant)"
    if s.public_search_tenant:
        auth += f"; public search for tenant '{s.public_search_tenant}'"
    chat = None
    if s.llm_base_url and s.llm_model:  # user:password@ in the URL stays out of the banner
        from urllib.parse import urlsplit

        parts = urlsplit(s.llm_base_url)
        where = parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl()
        chat = f"{s.llm_model} at {where}"
    write(BannerFacts(
        version=__version__, host=host, port=port, data_dir=s.data_dir,
        collections=len(rl.collections.all(rl.owner())), auth=auth,
        console=has_console(api), log_format=s.log_format, config_file=s.config_file,
        first_admin_key=first_key, admin_key_file=s.data_dir / "admin-key.txt",
        chat_model=chat), sys.stderr)


@app.command()
def optimize(
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (default ./data).")] = None,
    collection: Annotated[str | None, typer.Option(help="Only this collection.")] = None,
) -> None:
    """Build HNSW and payload indexes (run while the server is stopped: Edge holds the GIL)."""
    from ragline.facade import Ragline

    with Ragline(build_settings(data_dir)) as rl:
        me = rl.owner()
        for c in rl.collections.all(me):
            if collection and c.name != collection:
                continue
            if c.dimension:
                changed = rl.collections.optimize(me, c.name)
                typer.echo(f"{c.name}: {'optimized' if changed else 'already optimal'}")


_register_subcommands()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
