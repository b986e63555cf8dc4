"""The three places settings are read from (docs/protocol.md §2), each as plain data keyed by
field name, merged with the first that sets a value winning: the environment, `.env` and
`config.yaml`. Validation is the settings model's; only what a source cannot even read (JSON
that is not JSON, YAML that is not YAML) is refused here."""

from __future__ import annotations

import io
import json
import os
import stat
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, TypeGuard, get_origin

from pydantic import BaseModel


class BadConfiguration(ValueError):
    """A source of settings that cannot be read: config.yaml that is not a YAML mapping, a list
    or a section in the environment or `.env` that is not JSON."""


SETTINGS_FILE_BYTES = 256 * 1024  # a .env or config.yaml; far more than settings take
JSON_EXAMPLE = """AGENT_ALLOWED_ORIGINS='["http://host:5000"]'"""


def merged(*sources: Mapping[str, Any]) -> dict[str, Any]:
    """The sources, the first winning: a section (a mapping) is merged key by key."""
    result: dict[str, Any] = {}
    for source in reversed(sources):
        _update(result, source)
    return result


def _update(into: dict[str, Any], source: Mapping[str, Any]) -> None:
    for key, value in source.items():
        if isinstance(value, Mapping) and isinstance(into.get(key), dict):
            _update(into[key], value)
        else:
            into[key] = dict(value) if isinstance(value, Mapping) else value


class VariableReader:
    """Reads a settings model's fields from variables (the environment, or `.env`): a field is
    PREFIX<FIELD>, or its own variable when it has one; a section's field is also
    PREFIX<SECTION>_<FIELD>, which wins over the section's JSON. Names match in any case. A
    list, a mapping or a section is JSON; anything else is the text, for the model to parse."""

    def __init__(
        self, model: type[BaseModel], *, prefix: str, own_variables: Mapping[str, str]
    ) -> None:
        self._names: dict[str, str] = {}  # lower-case variable -> field
        self._json: set[str] = set()  # fields (and "section.field") written as JSON
        self._section_fields: dict[str, tuple[str, str]] = {}  # variable -> (section, field)
        for name, field in model.model_fields.items():
            self._names[own_variables.get(name, prefix + name).lower()] = name
            if _is_json(field.annotation):
                self._json.add(name)
            section = field.annotation
            if _is_model(section):
                for inner, inner_field in section.model_fields.items():
                    variable = f"{prefix}{name}_{inner}".lower()
                    self._section_fields[variable] = (name, inner)
                    if _is_json(inner_field.annotation):
                        self._json.add(f"{name}.{inner}")

    def read(self, variables: Mapping[str, str | None], where: str) -> dict[str, Any]:
        """The settings `variables` set; `where` names them in an error ("the environment")."""
        found: dict[str, Any] = {}
        overlays: dict[str, dict[str, Any]] = {}
        for variable, value in variables.items():
            if value is None:  # a `.env` line with a name and no `=`
                continue
            lower = variable.lower()
            if (name := self._names.get(lower)) is not None:
                found[name] = self._decode(name, variable, value, where)
            elif (place := self._section_fields.get(lower)) is not None:
                section, inner = place
                key = f"{section}.{inner}"
                overlays.setdefault(section, {})[inner] = self._decode(key, variable, value, where)
        for section, fields in overlays.items():
            whole = found.get(section)
            found[section] = {**whole, **fields} if isinstance(whole, dict) else fields
        return found

    def _decode(self, key: str, variable: str, value: str, where: str) -> Any:
        if key not in self._json:
            return value
        try:
            return json.loads(value)
        except ValueError as exc:
            raise BadConfiguration(
                f"{variable} in {where} is not JSON ({exc}): the setting {key} is a list or a "
                f"section, written as JSON there, e.g. {JSON_EXAMPLE}"
            ) from exc


def _is_model(annotation: Any) -> TypeGuard[type[BaseModel]]:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _is_json(annotation: Any) -> bool:
    """A list, a mapping or a section: what a variable writes as JSON. (A budget, a model that
    may be None, takes its text: `200k tokens`.)"""
    return get_origin(annotation) in (list, dict) or _is_model(annotation)


def read_settings_file(path: Path) -> io.StringIO | None:
    """The text of a settings file, named as `path` (None when there is no regular file
    there): opened without blocking, and refused unread past SETTINGS_FILE_BYTES."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        raise BadConfiguration(f"{path} cannot be read: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = handle.read(SETTINGS_FILE_BYTES + 1)
    if len(data) > SETTINGS_FILE_BYTES:
        raise BadConfiguration(
            f"{path} is over {SETTINGS_FILE_BYTES // 1024} KB, more than any settings file "
            "needs: it was not read"
        )
    try:
        text = io.StringIO(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BadConfiguration(f"{path} is not UTF-8 text ({exc})") from exc
    text.name = path.name  # yaml marks where it breaks with the name
    return text


def read_dotenv(path: Path) -> dict[str, str | None]:
    """The variables of a `.env` file (none when there is none)."""
    text = read_settings_file(path)
    if text is None:
        return {}
    from dotenv import dotenv_values  # only when there is a .env to read

    return dict(dotenv_values(stream=text))


def read_yaml(path: Path, fields: Collection[str]) -> dict[str, Any]:
    """The settings of a config.yaml (none when there is none): its keys are the field names;
    other keys are not ours and are left alone."""
    text = read_settings_file(path)
    if text is None:
        return {}
    import yaml

    from utils.yaml_text import safe_load

    try:
        data = safe_load(text)
    except yaml.YAMLError as exc:
        raise BadConfiguration(f"{path.name} is not valid YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise BadConfiguration(
            f"{path.name} must map setting names to values (`model: deepseek-chat`); "
            f"it holds a {type(data).__name__}"
        )
    return {key: value for key, value in data.items() if key in fields}
