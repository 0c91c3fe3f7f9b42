"""The `hwmodel` command line. Each ``cmd_*.py`` module here adds its commands (see :mod:`hwmodel.cli.base`)."""

from __future__ import annotations

import importlib
import pkgutil

from hwmodel.cli.base import group, main

for _mod in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("cmd_")):
    importlib.import_module(f"{__name__}.{_mod}")

from hwmodel.cli.harden import harden  # noqa: E402  (after every command is registered)

harden(main)

__all__ = ["group", "main"]
