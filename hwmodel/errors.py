"""Errors a user can act on. The CLI prints their message on one line, without a traceback."""

from __future__ import annotations


class HwmodelError(Exception):
    """Base class of every error caused by user input (specs, designs, traces, commands)."""


class SpecError(HwmodelError):
    """A spec file (TOML) is malformed or inconsistent. The message names the file, the field and why."""

    def __init__(self, path: object, field: str | None, expected: str, got: object = ...) -> None:
        where = f"{path}: field '{field}'" if field else f"{path}"
        got_txt = "" if got is ... else f", got {got!r}"
        super().__init__(f"{where}: expected {expected}{got_txt}")
        self.path = path
        self.field = field
        self.expected = expected


class UnknownNameError(HwmodelError):
    """A name (LLM, device, design, policy...) that is not known; the message lists the valid choices."""

    def __init__(self, what: str, name: str, choices: list[str]) -> None:
        super().__init__(f"unknown {what} '{name}'; valid choices: {', '.join(sorted(choices))}")
        self.what = what
        self.name = name
        self.choices = sorted(choices)
