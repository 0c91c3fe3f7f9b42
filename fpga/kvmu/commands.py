"""KVMU command files (COMMANDS.txt): one command per line, ``#`` starts a comment, blank lines are ignored.

::

    capacity 64      # optional directive, before the first command: the KV capacity in tokens
    init 8           # init POS
    speculate 5      # speculate N   (N drafted tokens)
    mark             # submit the drafted step for verification
    accept
    rollback
    ingest 3         # ingest N      (N target tokens over PCIe)
    wait 10          # N idle cycles

Arguments are decimal integers (a sign is allowed: a negative count is a legal line that the KVMU refuses when it
runs). A malformed line is reported as ``FILE:LINE: what is wrong; what was expected``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from fpga.kvmu.codes import TAKES_ARG, Op, command_text
from hwmodel.errors import HwmodelError

_INT = re.compile(r"[+-]?[0-9]+")
_INT64_MAX = 2**63 - 1
_ARG_MEANING = {
    Op.INIT: "the position to set valid, curr and ahead to",
    Op.SPECULATE: "the number of drafted tokens",
    Op.INGEST: "the number of target tokens",
    Op.WAIT: "the number of idle cycles",
}
_EXAMPLE = {Op.INIT: "init 0", Op.SPECULATE: "speculate 5", Op.INGEST: "ingest 3", Op.WAIT: "wait 10"}
COMMAND_WORDS = {op.name.lower(): op for op in Op}


class CommandFileError(HwmodelError):
    """A command file that cannot be read or parsed; the message names the file and line."""


@dataclass(frozen=True)
class Command:
    """One KVMU command; ``line`` is the command file's line number when it came from one."""

    op: Op
    arg: int = 0
    line: int | None = None

    @property
    def text(self) -> str:
        return command_text(int(self.op), self.arg)


@dataclass(frozen=True)
class CommandProgram:
    """A parsed command file: its commands and the ``capacity`` directive (None when absent)."""

    source: str
    commands: tuple[Command, ...]
    capacity: int | None


def _parse_int(word: str, where: str, what: str) -> int:
    if not _INT.fullmatch(word):
        raise CommandFileError(f"{where}: {what} must be an integer, got '{word}'")
    value = int(word)
    if abs(value) > _INT64_MAX:
        raise CommandFileError(f"{where}: {what} {value} does not fit in 64 bits")
    return value


def parse_commands(text: str, source: str = "<commands>") -> CommandProgram:
    """Parse the text of a command file; ``source`` names it in error messages."""
    commands: list[Command] = []
    capacity: int | None = None
    valid_words = ", ".join(COMMAND_WORDS)
    for number, raw in enumerate(text.splitlines(), start=1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        where = f"{source}:{number}"
        word, rest = words[0], words[1:]
        if word == "capacity":
            if commands:
                raise CommandFileError(f"{where}: the 'capacity' directive must come before the first command")
            if capacity is not None:
                raise CommandFileError(f"{where}: 'capacity' given twice")
            if len(rest) != 1:
                raise CommandFileError(
                    f"{where}: 'capacity' needs one integer (tokens), e.g. `capacity 64`; got {len(rest)} arguments"
                )
            capacity = _parse_int(rest[0], where, "the capacity")
            if capacity < 1:
                raise CommandFileError(f"{where}: the capacity must be >= 1 token, got {capacity}")
            continue
        op = COMMAND_WORDS.get(word)
        if op is None:
            raise CommandFileError(
                f"{where}: unknown command '{word}'; expected one of {valid_words} (or the 'capacity' directive)"
            )
        if op in TAKES_ARG:
            if not rest:
                raise CommandFileError(
                    f"{where}: '{word}' needs one integer argument ({_ARG_MEANING[op]}), "
                    f"e.g. `{_EXAMPLE[op]}`; got none"
                )
            if len(rest) > 1:
                raise CommandFileError(f"{where}: '{word}' takes one argument, got {len(rest)}: {' '.join(rest)}")
            commands.append(Command(op, _parse_int(rest[0], where, f"the argument of '{word}'"), number))
        else:
            if rest:
                raise CommandFileError(f"{where}: '{word}' takes no argument, got '{' '.join(rest)}'")
            commands.append(Command(op, 0, number))
    if not commands:
        raise CommandFileError(f"{source}: no commands (expected lines such as `init 0`, `speculate 5`, `accept`)")
    return CommandProgram(source, tuple(commands), capacity)


def load_commands(path: str | Path) -> CommandProgram:
    """Read and parse a command file."""
    path = Path(path)
    from hwmodel.io import errors_as, read_text

    if not path.exists():
        raise CommandFileError(f"{path}: no such command file")
    with errors_as(CommandFileError):
        text = read_text(path, "KVMU command file")
    return parse_commands(text, str(path))
