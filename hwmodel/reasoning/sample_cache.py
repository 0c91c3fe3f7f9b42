"""The cycle-level drafts' per-token samples kept on disk between runs (the warm-up's store, :mod:`.warmup`).

A sample of a :class:`~hwmodel.sampled.ContextSampledEngine` -- one token simulated cycle by cycle at one context,
decoded or ingested -- is a pure function of the wrapped engine's design and of the code that simulates it. The
full system-A reproduction simulates ~3,350 of them (~31 s of CPU, a third of the run) and every later run
simulates the same ones again. Here they are kept in the project's cache directory
(``<root>/samples`` under :func:`hwmodel.numba_cache.cache_root`; ``HWMODEL_CACHE_DIR=off`` turns it off;
``$HWMODEL_SAMPLE_CACHE_DIR``, when set, replaces ``<root>/samples``), one JSON file per engine, named by a digest
of

* the wrapped engine's type, its name and the repr of its design (every field of the frozen design, clock
  included) and its prefetch ratio, if it has one;
* every source file of the project's packages (:func:`hwmodel.numba_cache.tree_key`) and every data file beside
  them (specs, boards, designs, fitted parameters: ``.toml``/``.json``/``.yaml``/``.csv``),

so a change to any of them reads no old sample. The file also keeps the engine's per-phase powers (``power``, by
phase name; absent in older files): a cycle-level engine simulates a token per phase for them, ~1 s of CPU in
the full reproduction, on its critical path before the workers start. Values are stored as JSON floats (shortest repr: they read back
bit-identical), so every time read from a table -- every output -- is the same as with the samples simulated.
A damaged file (not JSON, wrong keys, a value that is not a finite non-negative float) is treated as absent: one
line on stderr, and it is rewritten after the run. An engine without a ``design`` is never cached.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

from hwmodel.engine import Phase
from hwmodel.io import note_damaged
from hwmodel.numba_cache import PACKAGES, cache_root, tree_key

CACHE_FORMAT = 1
DATA_SUFFIXES = (".toml", ".json", ".yaml", ".csv")
_TREE = Path(__file__).resolve().parents[2]
_data_key: str | None = None


def data_key() -> str:
    """A digest of every data file (relative path and bytes) in the project's packages, computed once."""
    global _data_key
    if _data_key is None:
        h = hashlib.sha256()
        for pkg in PACKAGES:
            for p in sorted(q for q in (_TREE / pkg).rglob("*") if q.suffix in DATA_SUFFIXES and q.is_file()):
                h.update(str(p.relative_to(_TREE)).encode())
                h.update(p.read_bytes())
        _data_key = h.hexdigest()[:16]
    return _data_key


def cache_path(engine: Any) -> Path | None:
    """The cache file of a sampled engine's samples (None: caching is off, or the engine has no design)."""
    root = cache_root()
    inner = getattr(engine, "engine", None)
    design = getattr(inner, "design", None)
    if root is None or design is None:
        return None
    where = (
        Path(os.environ["HWMODEL_SAMPLE_CACHE_DIR"]) if os.environ.get("HWMODEL_SAMPLE_CACHE_DIR") else root / "samples"
    )
    ident = repr(
        (
            CACHE_FORMAT,
            f"{type(inner).__module__}.{type(inner).__qualname__}",
            getattr(inner, "name", ""),
            getattr(inner, "prefetch_ratio", None),
            design,
            tree_key(),
            data_key(),
        )
    )
    return where / f"{hashlib.sha256(ident.encode()).hexdigest()[:24]}.json"


def _valid(table: Any, what: str = "sample at") -> dict[str, float]:
    """The table's entries, each checked to be a finite non-negative float (ValueError otherwise)."""
    if not isinstance(table, dict):
        raise ValueError(f"a table ({what} ...) is not an object")
    for k, v in table.items():
        if not isinstance(v, float) or not math.isfinite(v) or v < 0:
            raise ValueError(f"{what} {k!r} is not a finite non-negative float")
    return table


def _samples(table: Any) -> dict[int, float]:
    return {int(k): v for k, v in _valid(table).items()}


def load(path: Path) -> dict[bool, dict[int, float]]:
    """{head: {context: sample}} from a cache file; nothing when it is absent or damaged."""
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or doc.get("format") != CACHE_FORMAT:
            raise ValueError(f"format {doc.get('format') if isinstance(doc, dict) else None}, expected {CACHE_FORMAT}")
        return {True: _samples(doc["decode"]), False: _samples(doc["ingest"])}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        note_damaged(path, "draft-sample cache", f"{type(exc).__name__}: {exc}"[:160])
        return {}


def load_powers(path: Path) -> dict[Phase, float]:
    """{phase: power} from a cache file's ``power`` table (optional); nothing when the file is absent or damaged."""
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        table = doc.get("power", {}) if isinstance(doc, dict) and doc.get("format") == CACHE_FORMAT else {}
        return {Phase(k): v for k, v in _valid(table, "power of").items()}  # ValueError for a name not a phase
    except (OSError, ValueError, TypeError) as exc:
        note_damaged(path, "draft-sample cache", f"{type(exc).__name__}: {exc}"[:160])
        return {}


def save(path: Path, samples: dict[bool, dict[int, float]], powers: dict[Phase, float] | None = None) -> None:
    """Write ``samples`` and ``powers`` (merged with what the file holds) atomically; a directory that cannot be
    written is left alone (the next run simulates the samples again)."""
    have = load(path)
    merged = {h: {**have.get(h, {}), **samples.get(h, {})} for h in (True, False)}
    merged_powers = {**load_powers(path), **(powers or {})}
    doc = {
        "format": CACHE_FORMAT,
        "decode": {str(c): v for c, v in sorted(merged[True].items())},
        "ingest": {str(c): v for c, v in sorted(merged[False].items())},
        "power": {p.value: v for p, v in sorted(merged_powers.items(), key=lambda kv: kv[0].value)},
    }
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(doc), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):  # a full disk leaves no temporary file behind
            tmp.unlink(missing_ok=True)
