"""Where each configuration value comes from: its default, the config file, or the environment.

load_config layers defaults < the TOML file < TARS_<SECTION>_<KEY> < short aliases (TARS_VAULT, ...)
< command-line overrides; this walks the same layers and names the last one that set each key,
for `tarsctl config show` and `tarsctl doctor`.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tarsd.config.settings import SECTIONS, Config, ConfigError, config_file_path, load_config, setting_origin


@dataclass(frozen=True, slots=True)
class Setting:
    section: str
    key: str
    value: object
    source: str  # "default", "file", "env TARS_...", or "command line"


@dataclass(frozen=True, slots=True)
class Sources:
    config: Config
    file: Path
    file_exists: bool
    settings: list[Setting]


def config_sources(path: Path | None = None, env: dict[str, str] | None = None, **overrides: object) -> Sources:
    """The effective config and, per key, where its value came from. Raises ConfigError like load_config."""
    env = os.environ if env is None else env
    config = load_config(path, env, **overrides)
    file = config_file_path(path, env)
    file_data: dict = {}
    if file.exists():
        try:
            file_data = tomllib.loads(file.read_text(encoding="utf-8", errors="replace"))
        except (OSError, tomllib.TOMLDecodeError) as exc:  # load_config just read it: a race with an editor
            raise ConfigError(f"cannot read config file {file}: {exc}") from exc
    settings = []
    for section, struct in SECTIONS.items():
        from_file = file_data.get(section, {})
        for key in struct.__struct_fields__:
            source = setting_origin(section, key, env, overrides) or ("file" if key in from_file else "default")
            settings.append(Setting(section, key, getattr(getattr(config, section), key), source))
    return Sources(config=config, file=file, file_exists=file.exists(), settings=settings)
