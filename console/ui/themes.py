"""Colour themes as files: `themes/NAME.toml` holds a Textual theme's fields and extra variables.

Themes are looked up in three folders, a later one overriding an earlier one by name: the copy a wheel
installs (`<prefix>/share/serve-console/themes`), the checkout's `themes/` (an editable install), and
the user's own (`~/.config/serve-console/themes`), where an operator adds or overrides a theme.
"""

from __future__ import annotations

import sys
from pathlib import Path

import platformdirs
import tomli
from textual.theme import Theme

from console.errors import ConfigError

INSTALLED_THEMES = Path(sys.prefix) / "share" / "serve-console" / "themes"
CHECKOUT_THEMES = Path(__file__).resolve().parents[2] / "themes"


def theme_dirs() -> list[Path]:
    """The theme folders that exist, lowest precedence first."""
    user = platformdirs.user_config_path("serve-console", appauthor=False) / "themes"
    return [d for d in (INSTALLED_THEMES, CHECKOUT_THEMES, user) if d.is_dir()]


_FIELDS = {
    "primary", "secondary", "warning", "error", "success", "accent", "foreground", "background",
    "surface", "panel", "boost", "dark", "luminosity_spread", "text_alpha",
}


#: The shipped themes in the order `T` cycles them and the help lists them; other themes follow by name.
SHIPPED_ORDER = ("dark", "light", "high-contrast")


def theme_files(*dirs: Path) -> dict[str, Path]:
    """Theme name -> file, over `dirs` (default: `theme_dirs()`), later folders winning; in SHIPPED_ORDER."""
    files = {p.stem: p for d in (dirs or theme_dirs()) for p in sorted(d.glob("*.toml"))}
    rank = {name: i for i, name in enumerate(SHIPPED_ORDER)}
    return dict(sorted(files.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0])))


def theme_names() -> list[str]:
    """Names of the theme files, in the order `T` cycles them (SHIPPED_ORDER, then by name)."""
    return list(theme_files())


def load_theme(path: Path) -> Theme:
    """Read one theme file; a bad file is a ConfigError naming it."""
    try:
        data = tomli.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomli.TOMLDecodeError) as exc:
        raise ConfigError(path, None, f"cannot read theme: {exc}") from None
    unknown = set(data) - _FIELDS - {"name", "variables"}
    if unknown:
        raise ConfigError(path, None, f"unknown theme keys: {', '.join(sorted(unknown))}")
    if "primary" not in data:
        raise ConfigError(path, None, "a theme needs at least `primary`")
    fields = {k: v for k, v in data.items() if k in _FIELDS}
    variables = {str(k): str(v) for k, v in data.get("variables", {}).items()}
    return Theme(name=str(data.get("name", path.stem)), variables=variables, **fields)


def load_themes(*dirs: Path) -> dict[str, Theme]:
    """Every theme in `dirs` (default: `theme_dirs()`), by name."""
    themes = {}
    for path in theme_files(*dirs).values():
        theme = load_theme(path)
        themes[theme.name] = theme
    return themes
