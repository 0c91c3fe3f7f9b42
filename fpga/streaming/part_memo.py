"""Memoize a compiled part of a token by the design fields it actually read (:func:`memo_part`).

The tail (final norm, LM head, sampler) is most of a design's compile, and in a sweep many designs share it: it
does not read the attention engine, for instance (the DSE runner keeps such designs in one chunk:
``hwmodel.dse.streaming_eval.affinity``). :func:`memo_part` serves any part returning ``(segment, vector)``; the
compiler memoizes the tail only (memoizing the head and the layer's pre- and post-attention parts too cost as much
in matching as they saved in a DSE worker, measured). Which fields a part reads is not listed by hand: the part is
compiled once on a *traced* view of the compiler (:class:`_Traced`: the design, its engines, the engine index,
the first port of each engine and the hop matrix), which logs every attribute, item, length and membership read
with its value. A later compiler reuses the part when everything else it holds is equal by value and every logged
read gives the same value on it; the part then compiles to the same blocks, dependencies and requests, since the
lowering is deterministic in what it reads. A read the view cannot log (a method, an unhashable value) or a use of
the port count besides sizing the segment refuses the memo for that compile (compiled plainly, nothing stored).
tests/test_compile_exact.py compares warm programs with cold ones, hash for hash.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
from typing import Any

import numpy as np

from fpga.streaming.program_format import _Segment

_TRACED_ROOTS = ("d", "port0", "eng_idx", "hop")
_MAX_KEYS = 64
_MEMO: collections.OrderedDict[Any, list[tuple[tuple[tuple[tuple[Any, ...], Any], ...], Any]]] = (
    collections.OrderedDict()
)


class _Untraceable(Exception):
    """A read the traced view cannot log: the part is compiled plainly and not memoized."""


_LEAF = (int, float, str, bool, type(None), frozenset)


class _Traced:
    """A read-only view of ``obj`` logging each read (path -> value) into ``log``."""

    __slots__ = ("_obj", "_path", "_log")

    def __init__(self, obj: Any, path: tuple[Any, ...], log: dict[tuple[Any, ...], Any]) -> None:
        object.__setattr__(self, "_obj", obj)
        object.__setattr__(self, "_path", path)
        object.__setattr__(self, "_log", log)

    def _wrap(self, path: tuple[Any, ...], v: Any) -> Any:
        if isinstance(v, _LEAF) or (isinstance(v, tuple) and all(isinstance(x, _LEAF) for x in v)):
            self._log.setdefault(path, v)
            return v
        if isinstance(v, (tuple, list, dict)) or (dataclasses.is_dataclass(v) and not isinstance(v, type)):
            return _Traced(v, path, self._log)
        raise _Untraceable(path)

    def __getattr__(self, name: str) -> Any:
        return self._wrap((*self._path, ("a", name)), getattr(self._obj, name))

    def __getitem__(self, k: Any) -> Any:
        return self._wrap((*self._path, ("i", k)), self._obj[k])

    def __len__(self) -> int:
        n = len(self._obj)
        self._log.setdefault((*self._path, ("len",)), n)
        return n

    def __iter__(self) -> Any:
        return (self[i] for i in range(len(self)))

    def __contains__(self, x: Any) -> bool:
        got = x in self._obj
        self._log.setdefault((*self._path, ("in", x)), got)
        return got

    def __setattr__(self, name: str, v: Any) -> None:
        raise _Untraceable(self._path)

    def _whole(self, *_a: Any) -> Any:  # comparing or hashing a whole view would read it untraced
        raise _Untraceable(self._path)

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = __bool__ = _whole  # type: ignore[assignment]


def _read(roots: dict[str, Any], path: tuple[Any, ...]) -> Any:
    obj = roots[path[0]]
    for step in path[1:]:
        if step[0] == "a":
            obj = getattr(obj, step[1])
        elif step[0] == "i":
            obj = obj[step[1]]
        elif step[0] == "len":
            return len(obj)
        else:
            return step[1] in obj
    return obj


def _matches(roots: dict[str, Any], reads: tuple[tuple[tuple[Any, ...], Any], ...]) -> bool:
    try:
        return all(_read(roots, path) == v for path, v in reads)
    except (AttributeError, KeyError, IndexError, TypeError):
        return False


def _frozen(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return tuple(_frozen(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _frozen(x)) for k, x in v.items()))
    if isinstance(v, np.ndarray):
        return (str(v.dtype), v.shape, v.tobytes())
    hash(v)
    return v


class _PortLists:
    """A traced segment's requests per port, made on first use; any other use (its length, iterating the ports) is
    a read of the port count, which the memo does not key on."""

    def __init__(self) -> None:
        self.lists: dict[int, list[Any]] = {}

    def __getitem__(self, p: int) -> list[Any]:
        return self.lists.setdefault(p, [])

    def __len__(self) -> int:
        raise _Untraceable("n_ports")

    def __iter__(self) -> Any:
        raise _Untraceable("n_ports")


class _NoPortCount:
    """Stands for the compiler's port count while a part is traced: only the segment's size may depend on it (the
    traced compiler's :meth:`segment` gives :class:`_PortLists`); any other use fails and refuses the memo."""


def _traced_segment() -> _Segment:
    seg = _Segment(0)
    seg.reqs = _PortLists()  # type: ignore[assignment]
    return seg


def _state_key(c: Any, args: tuple[Any, ...]) -> Any:
    """Everything the compiler holds besides the traced roots, the accumulators and the graph, by value (the graph
    is a function of the LLM, the quantization scheme and the design's column split, all in the key or traced)."""
    items = [(k, v) for k, v in vars(c).items() if k not in (*_TRACED_ROOTS, "macs", "ledger", "g", "n_ports")]
    return (type(c), _frozen(sorted(items, key=lambda kv: kv[0])), ("column_units", c.d.column_units), _frozen(args))


#: compiler attributes a part changes that the memo replays itself (or that only the traced copy has)
_REPLAYED = frozenset({*_TRACED_ROOTS, "n_ports", "segment", "wptr", "macs", "ledger"})


def memo_part(c: Any, method: str, *args: Any) -> tuple[Any, ...]:
    """``getattr(c, method)(*args)`` -- a part of the token returning ``(segment, vector)`` (head, the layer's pre-
    and post-attention parts, the tail) -- reused from an earlier compiler whose reads agree (see the module
    docstring); ``c``'s weight pointers, MACs and ledger advance as the compile would advance them, and any other
    attribute the part sets on the compiler is set again. The segment and the vector it returns are shared by
    every reuse: callers read them, never change them."""
    try:
        key = (method, _state_key(c, args))
    except TypeError:  # an unhashable state: no memo
        return getattr(c, method)(*args)  # type: ignore[no-any-return]
    roots = {name: getattr(c, name) for name in _TRACED_ROOTS}
    for reads, part in _MEMO.get(key, ()):
        if _matches(roots, reads):
            _MEMO.move_to_end(key)
            return _apply(c, part)
    log: dict[tuple[Any, ...], Any] = {}
    tc = copy.copy(c)
    for name in _TRACED_ROOTS:
        setattr(tc, name, _Traced(roots[name], (name,), log))
    tc.n_ports = _NoPortCount()
    tc.segment = _traced_segment
    tc.wptr, tc.ledger = list(c.wptr), dict(c.ledger)
    before = {k: v for k, v in vars(c).items() if k not in _REPLAYED}
    try:
        seg, vec = getattr(tc, method)(*args)
    except Exception:  # noqa: BLE001 -- an untraceable read (or a genuine error, which the plain compile raises)
        return getattr(c, method)(*args)  # type: ignore[no-any-return]
    seg.arrays()  # memoized on the stored segment, shared by every reuse (read-only), as its ports' classes
    seg.port_ids()
    attrs = {k: v for k, v in vars(tc).items() if k not in _REPLAYED and (k not in before or before[k] is not v)}
    part = (
        seg,
        vec,
        [a - b for a, b in zip(tc.wptr, c.wptr)],
        tc.macs - c.macs,
        {k: tc.ledger[k] - c.ledger[k] for k in c.ledger},
        attrs,
    )
    _MEMO.setdefault(key, []).append((tuple(log.items()), part))
    _MEMO.move_to_end(key)
    if len(_MEMO) > _MAX_KEYS:
        _MEMO.popitem(last=False)
    return _apply(c, part)


def _apply(c: Any, part: Any) -> tuple[_Segment, Any]:
    seg, vec, d_wptr, d_macs, d_ledger, attrs = part
    c.wptr = [w + d for w, d in zip(c.wptr, d_wptr)]
    c.macs += d_macs
    for k, v in d_ledger.items():
        c.ledger[k] += v
    for k, v in attrs.items():
        setattr(c, k, copy.deepcopy(v))
    out = _Segment(0)
    out.eng, out.cyc, out.drain, out.op, out.deps = seg.eng, seg.cyc, seg.drain, seg.op, seg.deps
    out._arrays = seg._arrays
    out._req_arrays = seg.__dict__.setdefault("_req_arrays", {})  # type: ignore[attr-defined] # port p: same list
    out._port_ids = seg._port_ids  # type: ignore[attr-defined]
    out.reqs = [seg.reqs.lists.get(p, []) for p in range(c.n_ports)]
    if hasattr(seg, "x_in"):
        out.x_in = seg.x_in  # type: ignore[attr-defined]
    return out, vec


def clear() -> None:
    _MEMO.clear()
