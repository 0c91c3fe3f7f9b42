"""Registries of named implementations that register themselves from one file each (ARCHITECTURE.md,
"Registries"): system-A policies (:mod:`hwmodel.reasoning.policies`), device back-ends (:mod:`hwmodel.backends`),
and whatever else a layer wants to make pluggable.

A registry is filled by the modules of its package (each file calls :meth:`Registry.register` at import) and by
user files: :func:`load_plugin` imports a Python file by path, which registers what it defines the same way.
``HWMODEL_PLUGINS`` (paths separated by ``os.pathsep``) names files every process loads on first use, so a worker
process of a study sees the same registrations as its parent.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import pkgutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

from hwmodel.errors import HwmodelError, UnknownNameError

T = TypeVar("T")


class RegistryError(HwmodelError):
    """A registration clashes with an existing one, or a plugin file cannot be loaded."""


class Registry(Generic[T]):
    """Named implementations of one kind (``what``), filled from the modules of ``package`` on first use (only
    those whose names end with ``suffix``, when given). With ``rank``, listings are ordered by ``rank(item)`` and
    then by registration (a built-in's rank fixes where it stands in reports; a user's addition without one comes
    last)."""

    def __init__(
        self, what: str, package: str | None = None, *, suffix: str = "", rank: Callable[[T], float] | None = None
    ) -> None:
        self.what = what
        self.package = package
        self.suffix = suffix
        self.rank = rank
        self._items: dict[str, T] = {}
        self._loaded = False

    def register(self, name: str, item: T, *, replace: bool = False) -> T:
        """Register ``item`` as ``name``; a second registration of a name is refused unless ``replace``."""
        if not replace and name in self._items and self._items[name] is not item:
            raise RegistryError(f"{self.what} '{name}' is registered twice")
        self._items[name] = item
        return item

    def unregister(self, name: str) -> None:
        self._items.pop(name, None)

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            if self.package:
                pkg = importlib.import_module(self.package)
                for mod in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
                    if not mod.name.startswith("_") and mod.name.endswith(self.suffix):
                        importlib.import_module(f"{self.package}.{mod.name}")
        load_env_plugins()  # every use: a file named since the first use is loaded too (each file once)

    def get(self, name: str) -> T:
        self._load()
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.what, name, sorted(self._items)) from None

    def names(self) -> list[str]:
        return [name for name, _ in self.items()]

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._items

    def items(self) -> Iterator[tuple[str, T]]:
        self._load()
        pairs = list(self._items.items())
        if self.rank is not None:
            rank = self.rank
            pairs = [p for _, _, p in sorted((rank(item), i, (name, item)) for i, (name, item) in enumerate(pairs))]
        return iter(pairs)


_plugins: dict[str, object] = {}


def load_plugin(path: str | Path) -> object:
    """Import the Python file at ``path`` (once per process), so that what it registers is available."""
    p = Path(path).resolve()
    key = str(p)
    if key in _plugins:
        return _plugins[key]
    if not p.is_file():
        raise RegistryError(f"{p}: plugin file not found")
    name = "hwmodel_plugin_" + hashlib.sha256(key.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, p)
    if spec is None or spec.loader is None:
        raise RegistryError(f"{p}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    _plugins[key] = module
    try:
        spec.loader.exec_module(module)
    except HwmodelError:
        raise
    except Exception as exc:  # noqa: BLE001 - reported with the file
        _plugins.pop(key, None)
        raise RegistryError(f"{p}: loading the plugin failed ({type(exc).__name__}: {exc})") from None
    return module


def load_env_plugins() -> None:
    """Load the files named in ``HWMODEL_PLUGINS``."""
    for part in os.environ.get("HWMODEL_PLUGINS", "").split(os.pathsep):
        if part.strip():
            load_plugin(part.strip())
