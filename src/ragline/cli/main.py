"""The ``ragline`` command line: serve, optimize, and (as they land) ingest and eval.

Settings are built here, once, from the environment plus the flags given.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from ragline.cli import options
from ragline.settings import Settings

app = typer.Typer(help="ragline: a self-hosted RAG backend.", no_args_is_help=True,
                  pretty_exceptions_enable=False)

log = logging.getLogger("ragline")


def _register_subcommands() -> None:
    from ragline.cli.backup_cmd import backup, restore
    from ragline.cli.config_cmd import config_app
    from ragline.cli.eval_cmd import eval_app
    from ragline.cli.ingest_cmd import ingest

    app.add_typer(eval_app, name="eval")
    app.add_typer(config_app, name="config")
    app.command("backup")(backup)
    app.command("restore")(restore)
    app.command("ingest")(ingest)


def _cross_encoder_help() -> str:
    try:
        from ragline.providers.rerankers.catalog import help_text
    except ImportError:
        return "Cross-encoder model (Hugging Face name or cached id) for /rerank."
    return help_text()


@app.callback()
def _global_options(
    config: Annotated[Path | None, typer.Option(
        "--config", help="TOML settings file (default: $RAGLINE_CONFIG or ./ragline.toml). "
        "Precedence: flags > environment > file > defaults.")] = None,
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
        typer.echo(f"configuration error: {exc.message}", err=True)
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
) -> None:
    """Serve the HTTP API (embedded store, nothing else to start)."""
    if list_reranker_models:
        from ragline.providers.rerankers.catalog import render_list

        typer.echo(render_list())
        raise typer.Exit(0)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    settings = build_settings(data_dir, host=host, port=port, log_level=log_level,
                              log_format=log_format, cross_encoder_model=cross_encoder,
                              cross_encoder_path=cross_encoder_path)
    from ragline.observability.logs import configure_logging

    configure_logging(settings.log_level, settings.log_format)
    import uvicorn

    from ragline.api.app import create_app
    from ragline.facade import Ragline

    try:
        rl = Ragline(settings)
        _load_cross_encoder(rl)
    except Exception as exc:
        log.critical("start-up failed: %s", exc)
        raise typer.Exit(1) from exc
    from ragline.cli.banner import base_url
    from ragline.datadir import remove_server_file, write_server_file

    try:
        api = create_app(ragline=rl)
        typer.echo(_banner(rl, api))
        write_server_file(settings.data_dir, base_url(settings.host, settings.port))
        # log_config=None: uvicorn logs through ours (request ids, JSON); its access
        # log is replaced by ragline.access (route templates, request ids).
        uvicorn.run(api, host=settings.host, port=settings.port, log_level=settings.log_level,
                    log_config=None, access_log=False)
    finally:
        remove_server_file(settings.data_dir)
        rl.close()


def _banner(rl: Any, api: Any) -> str:
    """What a newcomer needs to know on start-up (see ragline.cli.banner)."""
    from ragline import __version__
    from ragline.api.docs_ui import has_console
    from ragline.cli.banner import BannerFacts, render

    s = rl.settings
    auth = getattr(rl, "auth_summary", None)
    return render(BannerFacts(
        version=__version__, host=s.host, port=s.port, data_dir=s.data_dir,
        collections=len(rl.collections.all()),
        auth=auth() if callable(auth) else "off (no API keys: anyone who can reach the port "
        "can read and write)",
        console=has_console(api), log_format=s.log_format,
        config_file=getattr(s, "config_file", None),
    ))


def _load_cross_encoder(rl: object) -> None:
    try:
        from ragline.providers.rerankers.cross_encoder import load_from_settings
    except ImportError:
        return
    rl.cross_encoder = load_from_settings(rl.settings)  # type: ignore[attr-defined]


@app.command()
def optimize(
    data_dir: Annotated[Path | None, typer.Option(help="Data directory (default ./data).")] = None,
    collection: Annotated[str | None, typer.Option(help="Only this collection.")] = None,
) -> None:
    """Build HNSW and payload indexes (run while the server is stopped: Edge holds the GIL)."""
    from ragline.facade import Ragline

    rl = Ragline(build_settings(data_dir))
    try:
        for c in rl.collections.all():
            if collection and c.name != collection:
                continue
            if c.dimension:
                changed = rl.store.optimize(c.shard)
                typer.echo(f"{c.name}: {'optimized' if changed else 'already optimal'}")
    finally:
        rl.close()


_register_subcommands()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
