"""Bad-input errors that say where the problem is: file, row (line) and field."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError


@dataclass(frozen=True)
class Issue:
    """One problem in the input: `where` is "file:line" (or a dataset name), `field` a dotted path."""

    where: str
    field: str
    message: str

    def __str__(self) -> str:
        parts = [p for p in (self.where, self.field) if p]
        return ": ".join([*parts, self.message])


class DataError(ValueError):
    """Input that cannot become tasks. Carries every `Issue` found, each printable on one line."""

    def __init__(self, issues: list[Issue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))

    @classmethod
    def at(cls, where: str, message: str, field: str = "") -> DataError:
        return cls([Issue(where, field, message)])


class RowError(ValueError):
    """A problem in one row, before the caller knows which file and line it came from."""

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}" if field else message)


def field_path(loc: tuple[int | str, ...], prefix: str = "") -> str:
    """("hidden", "fail_to_pass", 0) -> "hidden.fail_to_pass.0"."""
    parts = [prefix] if prefix else []
    return ".".join([*parts, *(str(p) for p in loc)])


def row_issues(where: str, exc: Exception) -> list[Issue]:
    """Turn a row's ValidationError / RowError / DataError into located issues."""
    if isinstance(exc, ValidationError):
        return [Issue(where, field_path(e["loc"]), e["msg"]) for e in exc.errors()]
    if isinstance(exc, RowError):
        return [Issue(where, exc.field, exc.message)]
    if isinstance(exc, DataError):
        return [Issue(where, i.field, i.message) for i in exc.issues]
    raise TypeError(f"not a row error: {exc!r}")
