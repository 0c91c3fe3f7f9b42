"""Fault injection shared by the fault suite: a file object that runs out of disk space after a byte budget."""

from __future__ import annotations

import errno
from typing import Any

import pytest


class FullDisk:
    """Wraps a file: writes go through until ``budget`` bytes (or characters) are written in total, then the write
    that crosses it writes what still fits and raises ``OSError(ENOSPC)`` -- what a full file system does."""

    def __init__(self, fh: Any, budget: int) -> None:
        self._fh, self.budget = fh, budget

    def write(self, data: Any) -> int:
        if len(data) > self.budget:
            self._fh.write(data[: self.budget])
            self._fh.flush()
            self.budget = 0
            raise OSError(errno.ENOSPC, "No space left on device")
        self.budget -= len(data)
        return self._fh.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fh, name)

    def __enter__(self) -> FullDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self._fh.__exit__(*exc)

    def __iter__(self) -> Any:
        return iter(self._fh)


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``full_disk(module, budget)``: every file ``module`` opens for writing (its ``open``) gets ``budget`` bytes."""
    import builtins

    def install(module: Any, budget: int) -> None:
        real = builtins.open

        def limited(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            fh = real(file, mode, *args, **kwargs)
            return FullDisk(fh, budget) if any(c in mode for c in "wax+") else fh

        monkeypatch.setattr(module, "open", limited, raising=False)

    return install
