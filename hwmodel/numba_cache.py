"""One place for the compiled Numba kernels of every package of the project, and a run without it when no
directory can be written.

Numba's own ``cache=True`` writes next to the source (``__pycache__``) or into ``~/.cache/numba`` and, when it can
write neither (a read-only or shared install, a container with a read-only home), fails at *import* with
``RuntimeError: cannot cache function ...: no locator available``. It also invalidates a cached kernel only when
the kernel's *own* file changes, not when a function or constant it takes from another module does
(``fpga.streaming.kernel``, ``fpga.streaming.schedule`` and ``fpga.instruction.simulator`` inline ``fpga.hbm.channel``'s channel model), so a stale cache could run
old code after an update.

This module puts a locator at the front of Numba's list that claims every source file of the project (the
packages in :data:`PACKAGES` next to this one) and keeps its kernels in

    <root>/numba/<tree key>/<numba's per-directory subpath>/

* ``<root>`` is the project's cache directory (:func:`cache_root`): ``$HWMODEL_CACHE_DIR``, else
  ``$XDG_CACHE_HOME/hwmodel`` or ``~/.cache/hwmodel``. ``$NUMBA_CACHE_DIR``, when set, replaces ``<root>/numba``.
  ``HWMODEL_CACHE_DIR=off`` (or empty) turns every disk cache off: the kernels compile in each process.
* ``<tree key>`` is a digest of every ``.py`` file of those packages: any change to any source (another version,
  another checkout) starts a fresh cache, so two source trees never share compiled code.
* When that directory cannot be created or written, the kernels run uncached (compiled once per process) and one
  line on stderr says so; nothing is written anywhere else.

:func:`install` is called by the ``__init__`` of every top-level package, so it is active before any kernel
module is imported; it costs nothing until Numba itself is imported (a one-shot import hook patches it then).
Files outside the project keep Numba's own locators.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

PACKAGES = ("hwmodel", "fpga", "gpu", "interconnect", "calibration")
_TREE = Path(__file__).resolve().parents[1]
_DIRS = tuple(str(_TREE / p) + os.sep for p in PACKAGES)

_key: str | None = None
_warned = False


def cache_root() -> Path | None:
    """The project's cache directory (``$HWMODEL_CACHE_DIR``, else ``$XDG_CACHE_HOME/hwmodel`` or
    ``~/.cache/hwmodel``); None when ``HWMODEL_CACHE_DIR`` is ``off``, ``0`` or empty."""
    env = os.environ.get("HWMODEL_CACHE_DIR")
    if env is not None:
        return None if env.strip() in ("", "off", "0") else Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "hwmodel"


def tree_key() -> str:
    """A digest of every ``.py`` file (relative path and bytes) of the project's packages, computed once."""
    global _key
    if _key is None:
        h = hashlib.sha256()
        for pkg in PACKAGES:
            for p in sorted((_TREE / pkg).rglob("*.py")):
                h.update(str(p.relative_to(_TREE)).encode())
                h.update(p.read_bytes())
        _key = h.hexdigest()[:16]
    return _key


def kernel_dir() -> Path | None:
    """Where this source tree's kernels are cached (None: caching is off)."""
    if os.environ.get("NUMBA_CACHE_DIR"):
        return Path(os.environ["NUMBA_CACHE_DIR"]) / f"hwmodel-{tree_key()}"
    root = cache_root()
    return None if root is None else root / "numba" / tree_key()


def in_project(py_file: str) -> bool:
    """Whether ``py_file`` is one of the project's sources, by its real path: a package imported through a symbolic
    link (a scratch directory that links ``fpga`` to the checkout, as the README tests do) is still ours."""
    return os.path.realpath(py_file).startswith(_DIRS)


class Uncached(Exception):
    """Raised by the locator for a project kernel that cannot be cached; the dispatcher then runs it uncached."""


def _warn_once(why: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        print(
            f"hwmodel: warning: Numba kernel cache not writable ({why}); kernels are compiled in every run",
            file=sys.stderr,
        )


def _patch(numba_mod: ModuleType | None = None) -> None:
    """Register the project locator and the uncached fall-back in the already imported Numba."""
    from numba.core import caching, dispatcher

    if getattr(caching, "_hwmodel_locator", None) is not None:
        return
    impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # renamed in numba 0.61
    base = caching._CacheLocator
    mixin = caching._SourceFileBackedLocatorMixin

    class ProjectCacheLocator(mixin, base):  # type: ignore[misc, valid-type]
        """Numba locator for the project's sources: ``kernel_dir()/<numba's per-directory subpath>``."""

        def __init__(self, py_func: Any, py_file: str, root: Path) -> None:
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            # by the real path: the kernels of a file reached through a link are those of the file itself
            self._cache_path = str(root / self.get_suitable_cache_subpath(os.path.realpath(py_file)))

        def get_cache_path(self) -> str:
            return self._cache_path

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            if not in_project(py_file) or not os.path.exists(py_file):
                return None  # not ours: Numba's own locators decide
            root = kernel_dir()
            if root is None:
                raise Uncached("")  # HWMODEL_CACHE_DIR=off: uncached by request, no warning
            global _roots
            if str(root) not in _roots:
                _roots = (*_roots, str(root))
            self = cls(py_func, py_file, root)
            try:
                self.ensure_cache_path()
            except OSError as exc:
                raise Uncached(f"{exc.filename or root}: {exc.strerror or exc}") from None
            return self

    impl._locator_classes.insert(0, ProjectCacheLocator)
    caching._hwmodel_locator = ProjectCacheLocator

    enable = dispatcher.Dispatcher.enable_caching

    def enable_caching(self: Any) -> None:
        try:
            enable(self)
        except Uncached as exc:
            if str(exc):
                _warn_once(str(exc))
            self._cache = caching.NullCache()

    dispatcher.Dispatcher.enable_caching = enable_caching

    # A damaged index or data file in our directory (a full disk, a copy cut short, scrambled bytes) reads as a
    # cache miss: the kernel is compiled and the entry rewritten, with one line on stderr. Numba itself catches
    # only OSError there, so a truncated pickle otherwise fails the first call of the kernel.
    files = caching.IndexDataCacheFile
    load_index, load_data = files._load_index, files._load_data

    def _ours(self: Any) -> bool:
        return self._cache_path.startswith(_roots)

    def guarded_load_index(self: Any) -> dict:
        try:
            return load_index(self)
        except Exception as exc:  # noqa: BLE001  (pickle and its callees raise anything on bad bytes)
            if not _ours(self):
                raise
            _note(self._index_path, exc)
            return {}

    def guarded_load_data(self: Any, name: str) -> Any:
        try:
            return load_data(self, name)
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001
            if not _ours(self):
                raise
            _note(self._data_path(name), exc)
            raise FileNotFoundError(exc) from None  # IndexDataCacheFile.load: OSError -> a cache miss

    files._load_index, files._load_data = guarded_load_index, guarded_load_data

    # Saving a compiled kernel into a full (or since read-only) directory: the kernel still runs, one line says
    # the cache was not written (Numba raises the OSError out of the kernel's first call otherwise).
    save = caching.Cache.save_overload

    def guarded_save(self: Any, sig: Any, data: Any) -> None:
        try:
            save(self, sig, data)
        except OSError as exc:
            if not self._cache_path.startswith(_roots):
                raise
            _warn_once(f"{exc.filename or self._cache_path}: {exc.strerror or exc}")

    caching.Cache.save_overload = guarded_save


_roots: tuple[str, ...] = ()


def _note(path: str, exc: Exception) -> None:
    from hwmodel.io import note_damaged

    note_damaged(path, "Numba kernel cache entry", f"{type(exc).__name__}: {exc}"[:120], "recompiled")


class _NumbaImportHook(importlib.abc.MetaPathFinder):
    """Patches Numba right after its package is first imported (then removes itself)."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "numba":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("numba")
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            _patch(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install() -> None:
    """Activate the project locator now if Numba is loaded, else as soon as it is (idempotent)."""
    if "numba.core.dispatcher" in sys.modules:
        _patch()
    elif not any(isinstance(f, _NumbaImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _NumbaImportHook())
