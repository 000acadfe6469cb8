"""All configuration in one pydantic-settings object.

Built once, in the app factory or the CLI, never at import time, so tests can
build as many differently configured apps as they like. Every field reads from
``RAGLINE_<FIELD>`` (or a ``.env`` file); secrets are ``SecretStr`` so they
never show up in logs, reprs or API responses.
"""

from ragline.settings.base import (
    ASIDE_SECTIONS,
    CONFIG_ENV,
    DEFAULT_CONFIG_FILE,
    PostgresCatalogOptions,
)
from ragline.settings.loading import (
    child_process_env,
    find_config_file,
    hub_offline,
    load_settings,
    masked_dump,
    openai_api_key_from_env,
    setting_sources,
)
from ragline.settings.model import Settings

__all__ = [
    "ASIDE_SECTIONS", "CONFIG_ENV", "DEFAULT_CONFIG_FILE", "PostgresCatalogOptions", "Settings",
    "child_process_env", "find_config_file", "hub_offline", "load_settings", "masked_dump",
    "openai_api_key_from_env", "setting_sources",
]
