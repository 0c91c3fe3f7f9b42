"""What the serving simulator knows about each device: its engine, memory, KV precision, link and price.

A :class:`DeviceModel` wraps one engine (:mod:`hwmodel.engine`, with its declared capabilities) with the facts
placement needs: the device memory, the bytes the replicated weights take, the bytes of one request's KV cache at a
context length, the PCIe link to the host, the price, how many requests it may decode together, whether the host
samples its tokens, and how long quantizing a KV cache for another device's precision takes on it. A
:class:`DeviceFactory` builds one per device group of a cluster; :class:`EngineFactory` (the default) uses the
registered engine builders (:mod:`hwmodel.serving.engines`: GPUs, instruction-driven and streaming FPGA designs).

Identical groups share one device model, so per-context decode times and the cumulative :class:`DecodeTable` are
computed once per kind of device, not once per card; with a cache directory (:func:`cache_dir`) the tables are
also kept on disk between runs, keyed by everything the engine's numbers depend on (the device, board and LLM
specs, the options, and the source of the device-model code).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hwmodel.engine import Capability, Phase, has
from hwmodel.errors import HwmodelError
from hwmodel.specs import LinkSpec, LlmSpec, SpecLibrary

BATCH_GRID_TOKENS = 64  # context resolution of the batched-decode tables (see DeviceModel.decode_batch_s)


DECODE_TABLES = ("exact", "steps", "grid")
STEP_GRID_TOKENS = 32  # grid of the "steps" and "grid" decode tables (see DecodeTable)


class DecodeTable:
    """Cumulative single-request decode time by context length: ``steps_s(ctx0, n)`` is the time of ``n`` decode
    steps starting at context ``ctx0`` (step k runs at ``ctx0 + k``), read from a prefix sum of the engine's
    per-context ``decode_s`` instead of ``n`` calls. Filled on demand, only over the contexts asked for.

    ``mode="exact"`` asks the engine for every context. ``mode="steps"`` is for engines whose per-context call is
    expensive (a cycle-level simulation of a whole token) and whose decode time is a non-decreasing step function
    of the context (KV read in blocks, as the instruction-driven FPGA tiles attention): it asks for the contexts
    on a global grid every ``STEP_GRID_TOKENS`` tokens and fills each grid interval whose ends differ from the
    contexts just inside its ends, then by bisection (:meth:`_fill_interval`), so an interval with equal ends is
    known to be constant -- exact for non-decreasing functions, with a few calls per step instead of one per
    context.

    ``mode="grid"`` is for engines whose per-context call is expensive and whose decode time grows smoothly with
    the context (the streaming FPGA: one more KV entry per token streamed through the attention engine): it asks
    for the grid contexts only and interpolates linearly between them -- an approximation whose error is bounded
    by the change of the step time over one grid interval (tests bound it against direct calls)."""

    def __init__(self, decode_s: Callable[[int], float], mode: str = "exact", max_ctx: int | None = None) -> None:
        if mode not in DECODE_TABLES:
            raise HwmodelError(f"decode table mode must be one of {', '.join(DECODE_TABLES)}, got {mode!r}")
        self._decode_s = decode_s
        self.mode = mode
        self.max_ctx = max_ctx  # the largest context the engine accepts (grid points never go past it)
        self.calls = 0
        self._val = np.zeros(0)
        self._have = np.zeros(0, dtype=bool)
        self._steps_memo: dict[tuple[int, int], float] = {}  # known values never change, so neither do these

    def _eval(self, ctx: int) -> float:
        if not self._have[ctx]:
            v = float(self._decode_s(ctx))
            self.calls += 1
            if not (math.isfinite(v) and v > 0):
                raise HwmodelError(f"decode engine returned a non-positive or non-finite time {v!r} at ctx {ctx}")
            self._val[ctx] = v
            self._have[ctx] = True
        return float(self._val[ctx])

    def _fill_steps(self, a: int, b: int) -> None:
        """Known values at a < b: fill (a, b) by bisection, a constant run wherever both ends agree."""
        if b - a <= 1:
            return
        if self._val[a] == self._val[b]:
            gap = ~self._have[a + 1 : b]
            self._val[a + 1 : b][gap] = self._val[a]
            self._have[a + 1 : b] = True
            return
        m = (a + b) // 2
        self._eval(m)
        self._fill_steps(a, m)
        self._fill_steps(m, b)

    def _fill_interval(self, a: int, b: int) -> None:
        """Known values at the ends of a grid interval a < b: fill it. Where the ends differ, the contexts just
        inside them are asked first: a KV cache read in blocks that the grid's spacing divides steps where a block
        opens or fills, at an end of the interval, and then the inside is known constant at once (two calls
        instead of a bisection's ten); otherwise the inside is bisected as :meth:`_fill_steps` does. The same
        values either way for a non-decreasing function; fewer calls on block steps."""
        if b - a > 3 and self._val[a] != self._val[b]:
            self._eval(a + 1)
            self._eval(b - 1)
            self._fill_steps(a + 1, b - 1)
        else:
            self._fill_steps(a, b)

    def _ensure(self, lo: int, hi: int) -> None:
        """Every context in [lo, hi) known."""
        if hi <= len(self._have) and self._have[lo:hi].all():
            return
        g = STEP_GRID_TOKENS
        size = max(hi, 2 * len(self._have)) if self.mode == "exact" else max((hi // g + 2) * g, 2 * len(self._have))
        if hi + g + 1 > len(self._have):
            self._val = np.concatenate([self._val, np.zeros(size - len(self._val))])
            self._have = np.concatenate([self._have, np.zeros(size - len(self._have), dtype=bool)])
        if self.mode == "exact":
            for c in range(lo, hi):
                self._eval(c)
        elif self.mode == "grid":
            a0 = (lo // g) * g
            b1 = -(-hi // g) * g
            for a in range(a0, b1, g):
                b = a + g if self.max_ctx is None else min(a + g, self.max_ctx)
                if b > a and not self._have[a : b + 1].all():
                    va, vb = self._eval(a), self._eval(b)
                    gap = ~self._have[a + 1 : b]
                    w = np.arange(1, b - a) / (b - a)
                    self._val[a + 1 : b][gap] = (va + w * (vb - va))[gap]
                    self._have[a + 1 : b] = True
                elif b <= a:
                    self._eval(a)
        else:  # whole global grid intervals, so the result never depends on the order of requests
            a0 = (lo // g) * g
            b1 = -(-hi // g) * g
            for a in range(a0, b1, g):
                b = a + g if self.max_ctx is None else min(a + g, self.max_ctx)
                if b > a and not self._have[a : b + 1].all():
                    self._eval(a)
                    self._eval(b)
                    self._fill_interval(a, b)
                elif b <= a:
                    self._eval(a)

    def snapshot(self) -> tuple[np.ndarray, np.ndarray]:
        """The known per-context values (for the disk cache)."""
        return self._val.copy(), self._have.copy()

    def restore(self, val: np.ndarray, have: np.ndarray) -> None:
        """Values from an earlier :meth:`snapshot` of an engine with the same cache key."""
        self._val = np.asarray(val, dtype=float).copy()
        self._have = np.asarray(have, dtype=bool).copy()
        self._steps_memo.clear()

    def step_s(self, ctx: int) -> float:
        self._ensure(ctx, ctx + 1)
        return float(self._val[ctx])

    def steps_s(self, ctx0: int, n: int) -> float:
        """Time of ``n`` consecutive single-request decode steps from context ``ctx0``: the steps' times summed in
        order, so the result depends on those steps alone, not on which other contexts the table (or its disk
        cache) already holds (memoized)."""
        if n <= 0:
            return 0.0
        v = self._steps_memo.get((ctx0, n))
        if v is None:
            self._ensure(ctx0, ctx0 + n)
            v = self._steps_memo[(ctx0, n)] = float(np.cumsum(self._val[ctx0 : ctx0 + n])[-1])
        return v

    def cumulative_from(self, ctx0: int, n: int) -> np.ndarray:
        """End times of steps 1..n (relative to the start of step 1) from context ``ctx0`` (summed in order, as
        :meth:`steps_s`)."""
        self._ensure(ctx0, ctx0 + n)
        return np.cumsum(self._val[ctx0 : ctx0 + n])


@dataclasses.dataclass(frozen=True)
class PrefillPlan:
    """A prefill on a device: how long it keeps the device busy, when each layer's KV cache is ready to leave
    (offsets from the start, quantization to the destination's precision included) and when the host finished
    issuing its kernels."""

    busy_s: float
    layer_ready_s: tuple[float, ...]
    host_done_s: float
    ready_array: np.ndarray = dataclasses.field(init=False, compare=False, repr=False)  # layer_ready_s as an array

    def __post_init__(self) -> None:
        object.__setattr__(self, "ready_array", np.array(self.layer_ready_s, dtype=np.float64))


@dataclasses.dataclass(eq=False)
class DeviceModel:
    """One kind of device serving the LLM (shared by every card of a group)."""

    label: str  # spec or design name, for reports
    engine: Any  # an engine with declared capabilities (hwmodel.engine)
    llm: LlmSpec
    memory_bytes: int
    weights_bytes: int
    kv_bits: int
    link: LinkSpec
    price_usd: float
    max_decode_batch: int = 1
    kv_bytes_fn: Callable[[int], int] | None = None
    mem_bw_bytes_per_s: float = 0.0  # device memory bandwidth, for the KV quantization pass without kv_quant_s
    padded_batch: bool = False  # a decode batch's KV is padded to its longest request (HF DynamicCache)
    decode_table: str = "exact"  # how the per-context decode table is filled (see DecodeTable)
    host_sampled: bool = False  # the host samples every token from logits sent over PCIe (FPGA decoders)
    kv_quant_s: Callable[[float, float], float] | None = None  # (read, write bytes) -> one quantization kernel
    max_ctx: int | None = None  # the longest context the device holds (default: the LLM's)
    cache_key: tuple[Any, ...] | None = None  # what the engine's numbers depend on (disk cache); None: no cache
    prefill_grid_tokens: int = 0  # > 0: prefill times interpolated between multiples of this (see prefill_s)
    table: DecodeTable = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        limit = self.llm.max_position if self.max_ctx is None else min(self.max_ctx, self.llm.max_position)
        self.table = DecodeTable(self.engine.decode_s, self.decode_table, limit - 1)
        if self.max_decode_batch > 1 and not has(self.engine, Capability.BATCH_DECODER):
            raise HwmodelError(
                f"{self.label}: max_decode_batch {self.max_decode_batch} needs an engine with the "
                "batch-decoder capability; this engine decodes one request at a time"
            )
        if self.weights_bytes >= self.memory_bytes:
            raise HwmodelError(
                f"{self.label}: the {self.llm.name} weights ({self.weights_bytes / 1e9:.2f} GB) do "
                f"not fit in its {self.memory_bytes / 1e9:.2f} GB of memory"
            )
        self._power: dict[Phase, float] | None = None  # by phase, on first use (or from the disk cache)
        self._plans: dict[tuple[int, int | None], PrefillPlan] = {}
        self._batch_grid: dict[int, dict[int, float]] = {}
        self.context_limit = limit  # tokens of context the device can hold
        self.saved_contexts = 0  # contexts of the table already in the disk cache
        self.prefill_memo: dict[int, float] = {}  # engine prefill times by prompt length (disk-cached)
        self.saved_prefills = 0
        self._kv_memo: dict[int, int] = {}
        self.saved_power = False

    def kv_bytes(self, ctx_tokens: int) -> int:
        """Bytes of one request's KV cache at ``ctx_tokens`` tokens, as this device stores it (memoized)."""
        v = self._kv_memo.get(ctx_tokens)
        if v is None:
            v = (
                int(self.kv_bytes_fn(ctx_tokens))
                if self.kv_bytes_fn is not None
                else self.llm.kv_bytes(ctx_tokens, self.kv_bits)
            )
            self._kv_memo[ctx_tokens] = v
        return v

    def batch_kv_bytes(self, final_ctxs: Sequence[int]) -> int:
        """KV memory of a decode batch whose requests end at ``final_ctxs`` tokens (padded or one per request)."""
        if not final_ctxs:
            return 0
        if self.padded_batch:
            return len(final_ctxs) * self.kv_bytes(max(final_ctxs))
        return sum(self.kv_bytes(c) for c in final_ctxs)

    def fits_alone(self, ctx_tokens: int) -> bool:
        return ctx_tokens <= self.context_limit and self.weights_bytes + self.kv_bytes(ctx_tokens) <= self.memory_bytes

    def _engine_prefill_s(self, n_tokens: int) -> float:
        v = self.prefill_memo.get(n_tokens)
        if v is None:
            v = float(self.engine.prefill_s(n_tokens, 0))
            self.prefill_memo[n_tokens] = v
        return v

    def prefill_s(self, n_tokens: int) -> float:
        """The engine's prefill time (memoized, disk-cached). With ``prefill_grid_tokens`` (engines whose prefill
        is an expensive cycle-level run: the FPGA designs) only prompts that are multiples of the grid are run,
        and a prompt in between is interpolated linearly between its two grid neighbours (exact on the grid; the
        instruction-driven design prefills in 128-token blocks, so its time is close to linear inside one)."""
        g = self.prefill_grid_tokens
        if g <= 0 or n_tokens % g == 0:
            return self._engine_prefill_s(n_tokens)
        lo = max(1, (n_tokens // g) * g)
        hi = min(-(-n_tokens // g) * g, self.context_limit)
        if hi <= lo:
            return self._engine_prefill_s(n_tokens)
        a, b = self._engine_prefill_s(lo), self._engine_prefill_s(hi)
        return a + (b - a) * (n_tokens - lo) / (hi - lo)

    def prefill_plan(self, n_tokens: int, kv_bits_out: int | None = None) -> PrefillPlan:
        """Prefill of ``n_tokens`` whose KV cache leaves the device at ``kv_bits_out`` bits (None: it stays).

        Layer ends come from the engine's ``prefill_timeline`` when it declares the prefill-timeline capability,
        else the prefill is split evenly over the layers. Leaving at fewer bits than the device keeps costs one quantization kernel
        per layer on the device's stream (read the layer's KV, write the quantized copy), which delays every
        later layer: the convention of :func:`interconnect.pcie.kv_migration`.
        """
        key = (n_tokens, kv_bits_out)
        plan = self._plans.get(key)
        if plan is not None:
            return plan
        layers = self.llm.layers
        if has(self.engine, Capability.PREFILL_TIMELINE):
            tl = self.engine.prefill_timeline(n_tokens)
            total, ends, host_done = float(tl.total_s), [float(x) for x in tl.layer_end_s], float(tl.host_done_s)
        else:
            total = self.prefill_s(n_tokens)
            ends, host_done = [total * (i + 1) / layers for i in range(layers)], 0.0
        t_quant = 0.0
        if kv_bits_out is not None and kv_bits_out < self.kv_bits:
            from hwmodel.graph import kv_cache_bytes

            read = kv_cache_bytes(self.llm, self.kv_bits, float(n_tokens), layers=1)  # one layer's K and V
            write = kv_cache_bytes(self.llm, kv_bits_out, float(n_tokens), layers=1)
            if self.kv_quant_s is not None:
                t_quant = self.kv_quant_s(read, write)
            elif self.mem_bw_bytes_per_s > 0:
                t_quant = (read + write) / self.mem_bw_bytes_per_s
        plan = PrefillPlan(
            total + layers * t_quant, tuple(e + (k + 1) * t_quant for k, e in enumerate(ends)), host_done
        )
        self._plans[key] = plan
        return plan

    def decode_batch_s(self, ctxs: Sequence[int]) -> float:
        """One decode step of a batch whose requests sit at contexts ``ctxs``.

        A batch of one reads the exact per-context table. Larger batches use the simulator's contract with batched
        engines: a step's time depends on the batch size and on how many KV entries it reads, i.e. on the mean
        context (paged KV) or the longest one (padded KV) -- as in gpu.latency's batched pass. Each batch size is
        tabulated on a grid of that context, every ``BATCH_GRID_TOKENS`` tokens, by asking the engine for a batch
        of equal contexts, and read by linear interpolation (tests bound the error against direct calls)."""
        b = len(ctxs)
        if b == 1:
            return self.table.step_s(ctxs[0])
        x = max(ctxs) if self.padded_batch else sum(ctxs) / b
        grid = self._batch_grid.setdefault(b, {})
        k0 = int(x // BATCH_GRID_TOKENS) * BATCH_GRID_TOKENS
        y = []
        for k in (k0, k0 + BATCH_GRID_TOKENS):
            if k not in grid:
                try:
                    grid[k] = float(self.engine.decode_batch_s([k] * b))
                except HwmodelError:  # a grid point past the memory limit: ask for this step itself
                    return float(self.engine.decode_batch_s(list(ctxs)))
            y.append(grid[k])
        w = (x - k0) / BATCH_GRID_TOKENS
        return y[0] + w * (y[1] - y[0])

    def power_w(self, phase: Phase) -> float:
        if self._power is None:
            self._power = {p: float(self.engine.power_w(p)) for p in Phase}
        return self._power[phase]


class DeviceFactory(Protocol):
    """Builds the device model of one device group of a cluster (``where``/``field`` name it in errors)."""

    def build(self, group: Any, llm: LlmSpec, lib: SpecLibrary, where: str, field: str) -> DeviceModel: ...

    def save(self) -> None:
        """Keep what was learned (decode tables) for later runs; may do nothing."""


def cache_dir() -> Path | None:
    """Where decode tables are kept between runs: ``$HWMODEL_CACHE_DIR``, else ``~/.cache/hwmodel/serving``;
    ``HWMODEL_CACHE_DIR=off`` (or an empty value) disables the disk cache."""
    env = os.environ.get("HWMODEL_CACHE_DIR")
    if env is not None:
        return None if env.strip() in ("", "off", "0") else Path(env)
    return Path.home() / ".cache" / "hwmodel" / "serving"


_CODE_HASH: str | None = None


def _code_hash() -> str:
    """A digest of the device-model source (gpu/, fpga/, interconnect/, hwmodel/specs/ and fitted parameters):
    a cached table is stale as soon as any of it changes."""
    global _CODE_HASH
    if _CODE_HASH is None:
        root = Path(__file__).resolve().parents[2]
        h = hashlib.sha256()
        files = [root / "hwmodel" / "serving" / "devices.py"]
        for d in ("hwmodel/specs", "gpu", "fpga", "interconnect", "calibration/params"):
            if (root / d).is_dir():
                files += sorted(p for p in (root / d).rglob("*") if p.suffix in (".py", ".json", ".toml"))
        for f in files:
            if f.is_file():
                h.update(str(f.relative_to(root)).encode())
                h.update(f.read_bytes())
        _CODE_HASH = h.hexdigest()[:16]
    return _CODE_HASH


#: the parameter files a model's numbers depend on, by the first field of its cache key (others: every file)
_PARAM_FAMILIES = {"gpu": ("gpu",), "instruction": ("fpga-instruction", "fpga-power"), "streaming": ("fpga-power",)}


def _params_key(model: DeviceModel) -> str:
    """A digest of the parameter files ``model`` reads when ``HWMODEL_PARAMS_DIR`` points away from the committed
    ones (a re-fit under study, a band's perturbed values): its tables are then its own; "" otherwise."""
    from hwmodel.params import PARAMS_DIR, params_dir

    d = params_dir()
    if d.resolve() == PARAMS_DIR.resolve():
        return ""
    fams = _PARAM_FAMILIES.get(str((model.cache_key or ("",))[0]))
    files = sorted(d.glob("*.json")) if fams is None else [d / f"{f}.json" for f in fams]
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes() if f.is_file() else b"-")
    return h.hexdigest()[:16]


TABLE_FORMAT = 2
"""Version of the engine-table cache file (``format`` in the archive); another version is rebuilt."""


def _read_table_file(path: Path, key: str) -> tuple[np.ndarray, np.ndarray, dict[int, float], list[float] | None]:
    """(decode values, which are known, prefill memo, per-phase power or None) from a cache file written by
    :meth:`EngineFactory.save` for ``key``; raises ValueError (or the archive's own error) on anything else."""
    with np.load(path, allow_pickle=False) as z:
        if "format" not in z.files or int(z["format"]) != TABLE_FORMAT:
            raise ValueError(f"format {z['format'] if 'format' in z.files else 'none'}, expected {TABLE_FORMAT}")
        if str(z["key"]) != key:
            raise ValueError("written for another key (code version)")
        val, have = np.asarray(z["val"], dtype=float), np.asarray(z["have"])
        pn, ps = np.asarray(z["prefill_n"]), np.asarray(z["prefill_s"], dtype=float)
        power = [float(w) for w in z["power_w"]] if "power_w" in z.files else None
    if val.ndim != 1 or have.shape != val.shape or have.dtype != bool:
        raise ValueError("decode table arrays of unequal shape or type")
    if not np.isfinite(val[have]).all() or (val[have] < 0).any():
        raise ValueError("a decode step time that is negative or not finite")
    if (
        pn.ndim != 1
        or pn.shape != ps.shape
        or pn.dtype.kind != "i"
        or (pn < 1).any()
        or not np.isfinite(ps).all()
        or (ps < 0).any()
    ):
        raise ValueError("prefill memo arrays of unequal shape or out-of-range values")
    if power is not None and (len(power) != len(Phase) or not all(math.isfinite(w) and w >= 0 for w in power)):
        raise ValueError("per-phase power of the wrong length or out of range")
    return val, have, dict(zip((int(n) for n in pn), (float(t) for t in ps))), power


class EngineFactory:
    """The project's device models through the registered engine builders, one model per distinct group, decode
    tables cached on disk (``cache``: a directory, None for :func:`cache_dir`, False for none)."""

    def __init__(self, cache: Path | None | bool = None) -> None:
        self._memo: dict[tuple[Any, ...], DeviceModel] = {}
        self.cache: Path | None = cache_dir() if cache is None or cache is True else (cache or None)  # type: ignore[assignment]

    @staticmethod
    def group_key(group: Any, llm: LlmSpec) -> tuple[Any, ...]:
        return (llm.name,) + tuple(getattr(group, f.name) for f in dataclasses.fields(group) if f.name != "count")

    def build(self, group: Any, llm: LlmSpec, lib: SpecLibrary, where: str, field: str) -> DeviceModel:
        from hwmodel.serving.engines import resolve_builder

        key = self.group_key(group, llm)
        if key not in self._memo:
            builder = resolve_builder(group, lib, where, field)
            model = builder.build(group, llm, lib, where, field)
            self._memo[key] = model
            self._load(model)
        return self._memo[key]

    def models(self) -> list[DeviceModel]:
        return list(self._memo.values())

    def _path(self, model: DeviceModel) -> Path | None:
        if self.cache is None or model.cache_key is None:
            return None
        digest = hashlib.sha256(
            repr((model.cache_key, model.decode_table, model.max_ctx, _code_hash(), _params_key(model))).encode()
        ).hexdigest()
        return self.cache / f"decode-{model.label}-{digest[:20]}.npz"

    def _load(self, model: DeviceModel) -> None:
        """Restore ``model``'s tables from its cache file. A damaged file (truncated, not an archive, scrambled --
        the archive's CRC-32 -- wrong arrays, another format or code version) is treated as absent: one line on
        stderr, and :meth:`save` rewrites it after this run."""
        path = self._path(model)
        if path is None or not path.is_file():
            return
        try:
            tables = _read_table_file(path, path.stem.rsplit("-", 1)[-1])
        except Exception as exc:  # noqa: BLE001  (whatever a damaged zip, pickle-free npz or array raises)
            from hwmodel.io import note_damaged

            note_damaged(path, "engine-table cache", f"{type(exc).__name__}: {exc}".replace("\n", " ")[:160])
            return
        val, have, prefill, power = tables
        model.table.restore(val, have)
        model.prefill_memo.update(prefill)
        if power is not None:
            model._power = {p: w for p, w in zip(Phase, power)}
        model.saved_contexts = int(have.sum())
        model.saved_prefills = len(model.prefill_memo)
        model.saved_power = model._power is not None

    def save(self) -> None:
        """Write every model's decode table that learned new contexts since it was loaded."""
        for model in self._memo.values():
            path = self._path(model)
            if path is None:
                continue
            val, have = model.table.snapshot()
            if (
                int(have.sum()) <= model.saved_contexts
                and len(model.prefill_memo) <= model.saved_prefills
                and model.saved_power
            ):
                continue
            tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                pn = sorted(model.prefill_memo)
                np.savez(
                    tmp,
                    format=np.array(TABLE_FORMAT),
                    key=np.array(path.stem.rsplit("-", 1)[-1]),
                    val=val,
                    have=have,
                    prefill_n=np.array(pn, dtype=np.int64),
                    prefill_s=np.array([model.prefill_memo[n] for n in pn], dtype=float),
                    power_w=np.array([model.power_w(p) for p in Phase], dtype=float),
                )
                model.saved_power = True
                os.replace(tmp, path)
                model.saved_contexts = int(have.sum())
                model.saved_prefills = len(pn)
            except OSError:  # a read-only or full cache directory only costs the next run its set-up time
                with contextlib.suppress(OSError):  # a half-written temporary file is never renamed into place
                    tmp.unlink()
