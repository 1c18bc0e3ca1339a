"""Colour themes as files: `themes/NAME.toml` holds a Textual theme's fields and extra variables."""

from __future__ import annotations

import tomllib
from pathlib import Path

from textual.theme import Theme

from console.errors import ConfigError

#: The repository's themes/ folder (the package is installed editable from the checkout).
THEME_DIR = Path(__file__).resolve().parents[2] / "themes"
_FIELDS = {
    "primary", "secondary", "warning", "error", "success", "accent", "foreground", "background",
    "surface", "panel", "boost", "dark", "luminosity_spread", "text_alpha",
}


def theme_names(theme_dir: Path = THEME_DIR) -> list[str]:
    """Names of the theme files, dark first."""
    names = sorted(p.stem for p in theme_dir.glob("*.toml"))
    return sorted(names, key=lambda n: (n != "dark", n))


def load_theme(path: Path) -> Theme:
    """Read one theme file; a bad file is a ConfigError naming it."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(path, None, f"cannot read theme: {exc}") from None
    unknown = set(data) - _FIELDS - {"name", "variables"}
    if unknown:
        raise ConfigError(path, None, f"unknown theme keys: {', '.join(sorted(unknown))}")
    if "primary" not in data:
        raise ConfigError(path, None, "a theme needs at least `primary`")
    fields = {k: v for k, v in data.items() if k in _FIELDS}
    variables = {str(k): str(v) for k, v in data.get("variables", {}).items()}
    return Theme(name=str(data.get("name", path.stem)), variables=variables, **fields)


def load_themes(theme_dir: Path = THEME_DIR) -> dict[str, Theme]:
    """Every theme in the folder, by name."""
    themes = {}
    for name in theme_names(theme_dir):
        theme = load_theme(theme_dir / f"{name}.toml")
        themes[theme.name] = theme
    return themes
