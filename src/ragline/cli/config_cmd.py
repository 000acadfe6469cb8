"""``ragline config show``: the effective configuration, secrets masked.

Shows what a server started here would use, after the TOML file, the
environment and the flags given to ``ragline``, and where each value came from.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

config_app = typer.Typer(help="Inspect the configuration.", no_args_is_help=True)


@config_app.command("show")
def show(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (for scripts).")] = False,
) -> None:
    """Print every setting with its value and source (flag, env, file or default)."""
    from ragline.cli.main import build_settings
    from ragline.settings import masked_dump, setting_sources

    settings = build_settings()
    values = masked_dump(settings)
    sources = setting_sources(settings)
    if as_json:
        typer.echo(json.dumps({"config_file": str(settings.config_file)
                               if settings.config_file else None,
                               "settings": values, "sources": sources}, indent=2, default=str))
        return
    typer.echo(f"# config file: {settings.config_file or '(none)'}")
    width = max(len(k) for k in values)
    for key, value in values.items():
        typer.echo(f"{key:<{width}} = {json.dumps(value, default=str):<40} # {sources[key]}")
