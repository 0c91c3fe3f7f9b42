"""What every spec has: identity, origin and the source of each value (:class:`Spec`)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import ClassVar

from hwmodel.schema import internal, plain

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


def _name_check(v: str) -> str | None:
    return None if _NAME_RE.match(v) else "a lower-case name of letters, digits, '.', '_' or '-'"


@dataclasses.dataclass(frozen=True, kw_only=True)
class Spec:
    """Fields common to every spec: identity, where it was loaded from, and the source of each value."""

    KIND: ClassVar[str] = ""
    kind: str = plain(doc="spec kind: llm, fpga-board, gpu or link")
    name: str = plain(check=_name_check, doc="the name used on the command line")
    display_name: str = plain(doc="human-readable name")
    notes: str = plain(default="", doc="free text")
    origin: str = internal(default="")
    sources: Mapping[str, str] = internal(default_factory=dict)

    def source_of(self, field: str) -> str:
        """Where the value of dotted ``field`` comes from."""
        return self.sources.get(field, "")
