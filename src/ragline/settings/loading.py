"""Loading settings (flags, environment, .env, TOML file) and showing them masked; the
few other reads of the process environment live here too, so it is read in
``ragline.settings`` only."""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import (
    AliasChoices,
    BaseModel,
    SecretStr,
    ValidationError,
)
from pydantic_settings import (
    SettingsError,
)

from ragline.errors import ConfigError
from ragline.settings.base import CONFIG_ENV, DEFAULT_CONFIG_FILE, _config_file
from ragline.settings.model import Settings


def hub_offline() -> None:
    """Hugging Face libraries offline (the same switches as
    ``Settings.apply_process_environment``), for code that loads models without a
    ``Settings`` at hand (model export)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


def openai_api_key_from_env() -> str | None:
    """The OpenAI-compatible embedder's key when its config names none:
    ``RAGLINE_OPENAI_API_KEY``, then the SDK's conventional ``OPENAI_API_KEY``. Read
    here so the environment is read in one module only."""
    return os.environ.get("RAGLINE_OPENAI_API_KEY") or os.environ.get("OPENAI_API_KEY") or None


def child_process_env(**extra: str) -> dict[str, str]:
    """The environment for a child process (git): ours plus ``extra``. Kept here so the
    environment is read in one module only."""
    return {**os.environ, **extra}


def find_config_file(explicit: Path | None = None,
                     environ: dict[str, str] | None = None) -> Path | None:
    """``--config`` > ``$RAGLINE_CONFIG`` > ``./ragline.toml`` if it exists > none.

    An explicitly named file must exist; the implicit ``./ragline.toml`` is optional.
    """
    env = os.environ if environ is None else environ
    named = explicit or (Path(env[CONFIG_ENV]) if env.get(CONFIG_ENV) else None)
    if named is not None:
        if not named.is_file():
            raise ConfigError(f"config file '{named.name}' not found")
        return named
    return DEFAULT_CONFIG_FILE if DEFAULT_CONFIG_FILE.is_file() else None


def _check_file_keys(path: Path) -> None:
    """Unknown keys in the file are errors (a typo must not be silently ignored)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path.name}: not valid TOML ({exc})") from exc
    except OSError as exc:
        raise ConfigError(f"{path.name}: cannot be read ({exc.strerror})") from exc
    known = set(Settings.model_fields)
    for key in data:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise ConfigError(f"{path.name}: unknown key '{key}'{hint}")


def _describe(err: Any, path: Path | None) -> str:
    key = ".".join(str(p) for p in err.get("loc", ())) or "?"
    where = f" (also check {path.name}, RAGLINE_{key.split('.')[0].upper()} and flags)" \
        if path else f" (check RAGLINE_{key.split('.')[0].upper()} and flags)"
    return f"invalid setting '{key}': {err.get('msg', 'invalid value')}{where}"


def load_settings(config_file: Path | None = None, **overrides: Any) -> Settings:
    """Settings from flags (``overrides``; None values ignored) > env > TOML file > defaults.

    Validated once, here; any error is a :class:`ConfigError` naming the key.
    """
    path = find_config_file(config_file)
    if path is not None:
        _check_file_keys(path)
    flags = {k: v for k, v in overrides.items() if v is not None}
    token = _config_file.set(path)
    try:
        settings = Settings(**flags)
    except ValidationError as exc:
        raise ConfigError("; ".join(_describe(e, path) for e in exc.errors())) from None
    except SettingsError as exc:  # names the field and the source, never the value
        raise ConfigError(str(exc)) from None
    finally:
        _config_file.reset(token)
    object.__setattr__(settings, "_ragline_config_file", path)
    return settings


def setting_sources(settings: Settings, flags: dict[str, Any] | None = None,
                    environ: dict[str, str] | None = None) -> dict[str, str]:
    """Where each value came from: flag, env, file or default (for ``config show``)."""
    env = os.environ if environ is None else environ
    file_keys: set[str] = set()
    if settings.config_file is not None:
        file_keys = set(tomllib.loads(settings.config_file.read_text(encoding="utf-8")))
    out: dict[str, str] = {}
    env_names = {k.upper() for k in env}
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        names = ({str(a).upper() for a in alias.choices if a != name}
                 if isinstance(alias, AliasChoices)
                 else {alias.upper()} if isinstance(alias, str)
                 else {f"RAGLINE_{name.upper()}"})
        if flags and flags.get(name) is not None:
            out[name] = "flag"
        elif names & env_names:
            out[name] = "env"
        elif name in file_keys:
            out[name] = "file"
        else:
            out[name] = "default"
    return out


_SECRET_WORDS = ("key", "secret", "token", "password", "passwd", "dsn", "credential")
_URL_PASSWORD = re.compile(r"(://[^/:@\s]*:)[^/@\s]+@")


def _mask(name: str, value: Any) -> Any:
    if isinstance(value, SecretStr):
        return "********"
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, BaseModel):  # typed options: SecretStr fields are masked below
        return {k: _mask(k, v) for k, v in dict(value).items()}
    if isinstance(value, dict):
        # provider options are plain dicts: mask what looks like a credential
        return {k: "********" if any(w in k.lower() for w in _SECRET_WORDS) and v
                else _mask(k, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mask(name, v) for v in value]
    if isinstance(value, str):  # a URL under another name may still carry a password
        return _URL_PASSWORD.sub(r"\1********@", value)
    return value


def masked_dump(settings: Settings) -> dict[str, Any]:
    """Every setting as JSON-able values, secrets shown as '********' (null if unset)."""
    return {name: _mask(name, getattr(settings, name)) for name in Settings.model_fields}
