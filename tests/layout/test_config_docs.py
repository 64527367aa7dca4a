"""docs/configuration.md lists every key: its TOML block has the same sections, keys and
defaults as the settings in tarsd/config/settings.py, so a new key cannot go undocumented and
a changed default cannot leave the page behind."""

from __future__ import annotations

import re
import tomllib

import msgspec

from harness.paths import REPO
from tarsd.config.settings import Config

# Defaults that depend on the machine, shown in the page as the empty value that means "the default".
MACHINE_DEFAULTS = {("chat", "anthropic_key_file")}


def documented() -> dict:
    page = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = page[page.index("## Every key") :]
    block = re.search(r"```toml\n(.*?)```", section, re.S)
    assert block, "docs/configuration.md has no toml block under 'Every key'"
    return tomllib.loads(block.group(1))


def test_every_key_is_documented_with_its_default():
    defaults = msgspec.to_builtins(Config())
    shown = documented()
    assert sorted(shown) == sorted(defaults), "sections in docs/configuration.md differ from Config's"
    for section, keys in defaults.items():
        assert sorted(shown[section]) == sorted(keys), f"[{section}] keys in docs/configuration.md differ from the settings"
        for key, value in keys.items():
            if (section, key) in MACHINE_DEFAULTS:
                assert shown[section][key] == "", f"[{section}] {key}: shown as empty (the machine's default)"
            else:
                assert shown[section][key] == value, f"[{section}] {key}: the page says {shown[section][key]!r}, the default is {value!r}"
