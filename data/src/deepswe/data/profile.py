"""Profiles: one YAML file of sections (`eval:`, `data:`, `tts:`, `reproduce:`, ...), read by one
loader with one override rule.

Every command that takes `--config PROFILE` reads its section(s) with `load_section`: the YAML,
then each `a.b.c=value` override (a full dotted path from the top of the profile, the value
parsed as YAML), then the command-line flags the caller passes as `edits` (paths inside the
section), then the section's pydantic model. A bad key or value is a ConfigError naming the file
and each bad key by its full path. The loader lives here, in the lowest package, because every
package above reads a section of the same file.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A profile or an override is invalid; the message names the file and each bad key."""


def parse_override(text: str) -> tuple[list[str], Any]:
    """`a.b=value` -> (["a", "b"], value parsed as YAML: numbers, bools, lists...)."""
    key, sep, raw = text.partition("=")
    parts = key.strip().split(".")
    if not sep or not key.strip() or any(not p for p in parts):
        raise ConfigError(f"override {text!r}: want key.path=value")
    return parts, yaml.safe_load(raw) if raw.strip() else ""


def set_path(data: dict[str, Any], path: list[str], value: Any, text: str) -> None:
    """`data[path[0]][path[1]]... = value`, creating sections; `text` names the override."""
    node = data
    for part in path[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {text!r}: {part!r} is not a section")
        node = child
    node[path[-1]] = value


def read_profile(path: str | Path) -> dict[str, Any]:
    """The top-level mapping of a YAML profile; ConfigError naming the file when it is not one."""
    try:
        doc = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: want a mapping of sections at the top level")
    return doc


def apply_overrides(
    doc: dict[str, Any], overrides: Sequence[str], sections: Sequence[str] | None = None
) -> None:
    """Each `a.b=v` of `overrides` set in `doc`, in order. `sections`: the top-level keys the
    command reads; an override outside them is refused by name (it would change nothing)."""
    for text in overrides:
        keys, value = parse_override(text)
        if sections is not None and (keys[0] not in sections or len(keys) < 2):
            want = " or ".join(f"{s}.<key>=value" for s in sections)
            raise ConfigError(f"override {text!r}: want {want} (a full dotted path)")
        set_path(doc, keys, value, text)


def config_error(where: str, exc: ValidationError, section: str = "") -> ConfigError:
    """One line per bad key, named by its dotted path (under `section`), with what is wrong."""
    lines = []
    for err in exc.errors():
        key = ".".join([*([section] if section else []), *(str(p) for p in err["loc"])])
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        lines.append(f"{key or '<root>'}: {msg}")
    return ConfigError(f"{where}: invalid config:\n  " + "\n  ".join(lines))


def validate_section(model: type[M], data: Any, where: str, section: str = "") -> M:
    """`model` of `data`, or ConfigError naming `where` and each bad key under `section`."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise config_error(where, exc, section) from None


def load_section(
    profile: str | Path | Mapping[str, Any] | None,
    section: str | None,
    model: type[M],
    overrides: Sequence[str] = (),
    edits: Mapping[str, Any] | None = None,
) -> M:
    """The validated `section` of `profile` (the whole document when section is None; the
    model's defaults when profile is None; an already read mapping is taken as it is), after
    `overrides` (full dotted paths, only into `section`) and `edits` (dotted paths inside the
    section, from command-line flags)."""
    doc: dict[str, Any] = {}
    where = "defaults"
    if isinstance(profile, Mapping):
        doc, where = copy.deepcopy(dict(profile)), "<profile>"  # the caller's stays as it is
    elif profile is not None:
        doc, where = read_profile(profile), str(profile)
    if section is not None:
        part = doc.get(section) or {}
        if not isinstance(part, dict):
            raise ConfigError(f"{where}: `{section}:` must be a mapping")
        doc[section] = dict(part)
    apply_overrides(doc, overrides, None if section is None else [section])
    data = doc if section is None else doc[section]
    for key, value in (edits or {}).items():
        set_path(data, key.split("."), value, f"--{key}")
    return validate_section(model, data, where, section or "")


__all__ = [
    "ConfigError",
    "apply_overrides",
    "config_error",
    "load_section",
    "parse_override",
    "read_profile",
    "set_path",
    "validate_section",
]
