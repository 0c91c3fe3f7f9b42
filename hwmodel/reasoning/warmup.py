"""Simulate the sampled per-token times of every cycle-level draft a study replays on once, spread over the
study's worker processes, before the study's own workers fork (docs/reasoning.md, "Run time").

A cycle-level draft (:class:`~hwmodel.sampled.ContextSampledEngine`: the streaming and instruction-driven FPGA
designs) simulates one token per sampled context, 3-15 ms each, and its tables are filled on demand, per process.
Forked workers each filled their own: in the full system-A reproduction both workers simulated the same 2,570
samples (~24 s of CPU each) and the break-even study simulated ~1,600 more in the parent, alone. Here the samples
that the replays will read are listed up front (from an upper bound of the contexts the traces reach), simulated
once by ``jobs`` processes, and stored in the parent's engines, which the study's workers then inherit.

A sample is a pure function of the engine and the context, and is stored exactly as simulated, so every time read
from the tables -- every output -- is unchanged; a sample the plan missed is simply simulated on demand as before.

The samples are also kept on disk between runs (:mod:`hwmodel.reasoning.sample_cache`, keyed by the design and a
digest of the project's sources and data): a later run loads them before planning and simulates only what the
cache lacks.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from hwmodel.engine import Capability, Phase, has
from hwmodel.reasoning import sample_cache
from hwmodel.reasoning.costs import TimedEngine
from hwmodel.sampled import ContextSampledEngine
from hwmodel.studies.runner import execute
from hwmodel.workload.steps import MAX_CONTEXT_TOKENS
from hwmodel.workload.trace import Problem, Replay

CHUNKS_PER_WORKER = 32  # samples are dealt round-robin into this many chunks per worker (a short tail)

_ENGINES: list[ContextSampledEngine] = []  # the engines of the warm-up in progress (workers inherit it by fork)


def context_bound(problems: Iterable[Problem], replays: Iterable[Replay]) -> int:
    """An upper bound of ``ctx + n`` over every operation a replay of ``problems`` runs (``replays``: their
    :func:`~hwmodel.workload.trace.replay_of`): an attempt's context plus its tokens, or the context after an
    attempt plus a speculated generation (none after a final step), at most one attempt long and capped at the
    trace's context limit (:class:`~hwmodel.reasoning.sim.ProblemSimulation`'s ``_cap``)."""
    bound = 0
    for p, rp in zip(problems, replays, strict=True):
        longest = max((a.tokens for a in p.attempts), default=0)
        for a, ctx in zip(p.attempts, rp.context_tokens):
            after = ctx + a.tokens
            if a.final:  # nothing is speculated or prefetched after the answer's last step
                bound = max(bound, after)
            else:
                bound = max(bound, after, min(after + longest, max(MAX_CONTEXT_TOKENS, after + 1)))
    return bound


def sampled(engine: TimedEngine) -> ContextSampledEngine | None:
    """The engine with sampled per-token times (the ``sampled`` capability) a timed engine wraps, if any."""
    inner = engine.engine
    return inner if has(inner, Capability.SAMPLED) else None


def plan(targets: Iterable[tuple[TimedEngine, int]]) -> list[tuple[ContextSampledEngine, bool, list[int]]]:
    """(engine, head, contexts) of the samples still to simulate so that the decode and ingest tables of each
    timed engine cover contexts up to its bound (the largest bound per engine)."""
    bounds: dict[int, tuple[TimedEngine, int]] = {}
    for te, bound in targets:
        if sampled(te) is None:
            continue
        prev = bounds.get(id(te))
        bounds[id(te)] = (te, max(bound, prev[1] if prev else 0))
    out = []
    for te, bound in bounds.values():
        eng = sampled(te)
        assert eng is not None
        if te.max_ctx is not None:
            bound = min(bound, te.max_ctx)  # the replays never ask past the engine's capacity (it would refuse)
        n_ctx = te.table_contexts(bound)
        for head in (True, False):
            need = eng.samples_needed(n_ctx, head)
            if need:
                out.append((eng, head, need))
    return out


def warm(targets: Iterable[tuple[TimedEngine, int]], jobs: int, side: Iterator[object] | None = None) -> int:
    """Simulate the planned samples on ``jobs`` forked processes (in this process when ``jobs == 1``) and store
    them in the engines; returns how many samples were simulated.

    ``side``: this process's own work, one step per ``next``, done a step at a time as the workers' results come
    in (between two results the workers keep computing the chunks queued ahead), the rest after the last."""
    side = iter(()) if side is None else side
    simulated = _warm(targets, jobs, side)
    for _ in side:
        pass
    return simulated


def load_cached(targets: Iterable[tuple[TimedEngine, int]]) -> dict[int, tuple[ContextSampledEngine, Path]]:
    """Store in each sampled engine of ``targets`` the samples the disk cache holds for it
    (:mod:`hwmodel.reasoning.sample_cache`); returns the engines that have a cache file (by id)."""
    out: dict[int, tuple[ContextSampledEngine, Path]] = {}
    for te, _bound in targets:
        eng = sampled(te)
        if eng is None or id(eng) in out:
            continue
        path = sample_cache.cache_path(eng)
        if path is None:
            continue
        out[id(eng)] = (eng, path)
        for head, samples in sample_cache.load(path).items():
            eng.add_samples(head, samples)
        eng.add_powers(sample_cache.load_powers(path))
    return out


def phase_powers(engine: TimedEngine) -> list[float]:
    """The timed engine's power in every phase; a sampled engine's powers it did not read from the sample cache
    (a token simulated per phase) are computed and added to its cache file."""
    eng = sampled(engine)
    known = len(eng.powers) if eng is not None else 0
    out = [engine.power_w(phase) for phase in Phase]
    path = sample_cache.cache_path(eng) if eng is not None and len(eng.powers) > known else None
    if path is not None:
        sample_cache.save(path, {}, eng.powers)
    return out


def _warm(targets: Iterable[tuple[TimedEngine, int]], jobs: int, side: Iterator[object]) -> int:
    targets = list(targets)
    cached = load_cached(targets)
    work = plan(targets)
    if not work:
        return 0
    # engines that simulate the same tokens (e.g. one streaming design sampled on two grids) share their samples
    groups: list[list[ContextSampledEngine]] = []
    for eng, _head, _ctxs in work:
        g = next((g for g in groups if g[0].shares_samples_with(eng)), None)
        if g is None:
            groups.append([eng])
        elif all(e is not eng for e in g):
            g.append(eng)
    group_of = {id(e): k for k, g in enumerate(groups) for e in g}
    engines = [g[0] for g in groups]  # each group's samples are simulated by its first engine
    wanted: dict[tuple[int, bool], set[int]] = {}
    for eng, head, ctxs in work:
        wanted.setdefault((group_of[id(eng)], head), set()).update(ctxs)
    # each engine's first sample here, before the fork: whatever kernels the samples run are compiled (or loaded
    # from Numba's cache) once, in this process, and inherited, instead of once per worker
    first: dict[tuple[int, bool, int], float] = {}
    for (k, head), ctxs in sorted(wanted.items()):
        if not any(key[0] == k for key in first):
            c = min(ctxs)
            first[(k, head, c)] = engines[k].simulate_sample(c, head)
            ctxs.discard(c)
    # a context's decoded and ingested samples side by side (a streaming token's layer is compiled once for both)
    at = sorted({(k, c) for (k, _head), ctxs in wanted.items() for c in ctxs})
    pairs = [[(k, head, c) for head in (True, False) if c in wanted.get((k, head), ())] for k, c in at]
    n_chunks = max(1, min(len(pairs), CHUNKS_PER_WORKER * max(1, jobs)))
    # round-robin: each chunk gets every engine's samples
    chunks = [[item for pair in pairs[i::n_chunks] for item in pair] for i in range(n_chunks)]
    results: dict[int, list[float]] = {}  # chunk number -> its samples (chunks finish in any order)

    def finished(res: tuple[int, list[float]]) -> None:
        results[res[0]] = res[1]
        next(side, None)

    _ENGINES[:] = engines
    try:
        execute(_simulate_chunk, None, list(enumerate(chunks)), finished, workers=max(1, jobs), start_method="fork")
    finally:
        _ENGINES.clear()
    values = dict(first)
    for i, ch in enumerate(chunks):
        values.update(zip(ch, results[i]))
    new: dict[int, dict[bool, dict[int, float]]] = {}
    for eng, head, ctxs in work:
        k = group_of[id(eng)]
        got = {c: values[(k, head, c)] for c in ctxs}
        eng.add_samples(head, got)
        new.setdefault(id(eng), {})[head] = got
    for key, samples in new.items():
        if key in cached:
            sample_cache.save(cached[key][1], samples)
    return len(first) + sum(len(pair) for pair in pairs)


def _simulate_chunk(_ref: None, numbered: tuple[int, Sequence[tuple[int, bool, int]]]) -> tuple[int, list[float]]:
    """Worker task: (chunk number, the samples of its (engine index, head, context) items)."""
    i, chunk = numbered
    return i, [_ENGINES[k].simulate_sample(ctx, head) for k, head, ctx in chunk]
