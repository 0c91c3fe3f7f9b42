"""The spec library: every spec file found, validated and looked up by kind and name."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from hwmodel.errors import SpecError, UnknownNameError
from hwmodel.schema import build, read_toml
from hwmodel.specs.base import Spec
from hwmodel.specs.board import BoardSpec
from hwmodel.specs.gpu import GpuSpec
from hwmodel.specs.link import LinkSpec
from hwmodel.specs.llm import LlmSpec

SPEC_KINDS: dict[str, type[Spec]] = {c.KIND: c for c in (LlmSpec, LinkSpec, BoardSpec, GpuSpec)}
_PKG_ROOT = Path(__file__).resolve().parents[2]
BUILTIN_DIRS: dict[str, Path] = {
    "llm": _PKG_ROOT / "hwmodel" / "llms",
    "fpga-board": _PKG_ROOT / "fpga" / "boards",
    "gpu": _PKG_ROOT / "gpu" / "devices",
    "link": _PKG_ROOT / "interconnect" / "links",
}
KIND_WORDS = {"llm": "LLM", "fpga-board": "FPGA board", "gpu": "GPU", "link": "link", "device": "device"}


def load_spec_file(path: Path | str, expected_kind: str | None = None) -> Spec:
    """Load one spec file; its ``kind`` field picks the dataclass."""
    path = Path(path)
    table = read_toml(path)
    kind = table.get("kind")
    if not isinstance(kind, str) or kind not in SPEC_KINDS:
        raise SpecError(path, "kind", "one of " + ", ".join(repr(k) for k in SPEC_KINDS), kind)
    if expected_kind is not None and kind != expected_kind:
        raise SpecError(path, "kind", repr(expected_kind) + " in this directory", kind)
    return build(SPEC_KINDS[kind], table, path=path)


class SpecLibrary:
    """All specs known to a run: the built-ins plus any user directories (later directories win)."""

    def __init__(self, extra_dirs: tuple[Path, ...] = ()) -> None:
        self._specs: dict[str, dict[str, Spec]] = {k: {} for k in SPEC_KINDS}
        for kind, folder in BUILTIN_DIRS.items():
            for path in sorted(folder.glob("*.toml")):
                self._add(load_spec_file(path, kind), builtin=True)
        for folder in extra_dirs:
            folder = Path(folder)
            if not folder.is_dir():
                raise SpecError(folder, None, "an existing directory of spec TOML files")
            for path in sorted(folder.rglob("*.toml")):
                self._add(load_spec_file(path), builtin=False)
        self._check_references()

    def _add(self, spec: Spec, builtin: bool) -> None:
        table = self._specs[spec.KIND]
        if spec.name in table and builtin:
            raise SpecError(spec.origin, "name", f"a name not already used by {table[spec.name].origin}", spec.name)
        table[spec.name] = spec

    def _check_references(self) -> None:
        links = self._specs["link"]
        for kind in ("fpga-board", "gpu"):
            for spec in self._specs[kind].values():
                link = spec.host_link  # type: ignore[attr-defined]
                if link not in links:
                    raise SpecError(
                        spec.origin, "host_link", "the name of a link spec (" + ", ".join(sorted(links)) + ")", link
                    )

    # ---- lookups
    def names(self, kind: str) -> list[str]:
        if kind == "device":
            return sorted([*self._specs["fpga-board"], *self._specs["gpu"]])
        return sorted(self._specs[kind])

    def get(self, kind: str, name: str) -> Any:
        if kind == "device":
            for k in ("fpga-board", "gpu"):
                if name in self._specs[k]:
                    return self._specs[k][name]
        elif name in self._specs[kind]:
            return self._specs[kind][name]
        raise UnknownNameError(KIND_WORDS[kind], name, self.names(kind))

    def find(self, name: str) -> Spec:
        """Any spec by name (for `specs show`)."""
        for table in self._specs.values():
            if name in table:
                return table[name]
        raise UnknownNameError("spec", name, [n for t in self._specs.values() for n in t])

    def all(self) -> list[Spec]:
        return [s for kind in SPEC_KINDS for _n, s in sorted(self._specs[kind].items())]

    def llm(self, name: str) -> LlmSpec:
        return self.get("llm", name)

    def board(self, name: str) -> BoardSpec:
        return self.get("fpga-board", name)

    def gpu(self, name: str) -> GpuSpec:
        return self.get("gpu", name)

    def link(self, name: str) -> LinkSpec:
        return self.get("link", name)

    def device(self, name: str) -> BoardSpec | GpuSpec:
        return self.get("device", name)


_extra_dirs: tuple[Path, ...] = ()


def extra_spec_dirs() -> tuple[Path, ...]:
    """The directories :func:`set_extra_spec_dirs` set (the CLI's ``--spec-dir``)."""
    return _extra_dirs


def set_extra_spec_dirs(dirs: tuple[Path, ...] | list[Path]) -> None:
    """Directories of user specs for :func:`library` (the CLI's ``--spec-dir``)."""
    global _extra_dirs
    _extra_dirs = tuple(Path(d) for d in dirs)
    _cached_library.cache_clear()


def _env_dirs() -> tuple[Path, ...]:
    raw = os.environ.get("HWMODEL_SPEC_PATH", "")
    return tuple(Path(p) for p in raw.split(os.pathsep) if p)


@functools.lru_cache(maxsize=8)
def _cached_library(dirs: tuple[Path, ...]) -> SpecLibrary:
    return SpecLibrary(dirs)


def library() -> SpecLibrary:
    """The spec library of this process: built-ins + HWMODEL_SPEC_PATH + --spec-dir (loaded once, validated)."""
    return _cached_library(_env_dirs() + _extra_dirs)
