"""The GPU prefills a study's replays will ask for, listed from their traces and computed before the study's
workers fork, in a few vectorized passes per engine (docs/reasoning.md, "Speed").

A GPU engine's prefill memo (:class:`~hwmodel.reasoning.costs.TimedEngine`) is otherwise filled on demand, a block
of 256 neighbouring points per miss, and every forked worker fills its own. In the full system-A reproduction the
two workers computed ~9,900 blocks each (2.5 M points, ~13 s of CPU between them) for the 92,700 distinct points
the replays asked for; ~8,000 blocks were computed by both.

Which points a replay asks for follows from what a prefill is (:mod:`hwmodel.reasoning.sim`): a request's total
context -- cached plus new tokens -- is an attempt's context or the context after an attempt (a speculated or
refined step), and its cached part is nothing, all but one token, or the context of another attempt of the same
problem (a prefix the server has cached; the ``NEAREST_PREFIXES`` longest below the total are tried). A request
that resumes a stopped generation (a T2 prefetch stopped when the draft's step at its context was accepted, resumed
by the first target step from that context after a backtrack) prefills the tokens the stopped run produced on top
of the cached context: every count from one to the step's tokens less one is a candidate, for those target steps
only (measured: these were half the blocks the workers still filled on demand, each a 256-point pass of ~1 ms,
filled again by every T2 policy's unit). A PRM's points are its scoring passes, one per attempt. A request outside
the candidates is computed on demand, as before.

Values do not change: a memoized point holds the engine's ``prefill_many`` element for it, whichever pass
computed it (tests/test_reasoning_prefill_plan.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import numpy as np

from hwmodel.reasoning.costs import TimedEngine
from hwmodel.workload.trace import ACCEPT, DRAFT, TARGET, Problem, Replay

_CTX_CODE = 1 << 32  # a (tokens, ctx) pair packed as tokens * _CTX_CODE + ctx, to deduplicate with numpy
#: cached prefixes tried below each total context: the longest ones. Measured on the full reproduction, the two
#: longest cover 94.0-98.0 % of the targets' prefill points and 96.5 % of a GPU draft's, every one of them
#: 96.6-99.5 % and 100 % at 2.5 times the candidates; a point missed is computed on demand (only speed changes)
NEAREST_PREFIXES = 2


def candidate_points(problems: Sequence[Problem], replays: Sequence[Replay]) -> np.ndarray:
    """The (new tokens, cached tokens) prefill points a GPU model server's replay of ``problems`` may ask for
    (module docstring), as packed codes (``tokens * 2**32 + ctx``), sorted and unique: every total context, on
    nothing cached, on all but one token, or on one of the ``NEAREST_PREFIXES`` longest other contexts of the
    problem below it."""
    codes = []
    for p, rp in zip(problems, replays, strict=True):
        ctxs = np.asarray(rp.context_tokens, dtype=np.int64)
        tokens = np.fromiter((a.tokens for a in p.attempts), dtype=np.int64, count=len(p.attempts))
        totals = np.unique(np.concatenate([ctxs, ctxs + tokens]))
        prefixes = np.unique(ctxs[ctxs > 0])
        codes.append(totals * _CTX_CODE)  # nothing cached
        codes.append(_CTX_CODE + totals[totals > 1] - 1)  # all but one token cached
        below = np.searchsorted(prefixes, totals)  # prefixes[:below[i]] are shorter than totals[i]
        for k in range(1, NEAREST_PREFIXES + 1):
            ok = below >= k
            cached = prefixes[below[ok] - k]
            codes.append((totals[ok] - cached) * _CTX_CODE + cached)
        codes.extend(_resumed_points(p, rp))
    return np.unique(np.concatenate(codes)) if codes else np.zeros(0, dtype=np.int64)


def _resumed_points(p: Problem, rp: Replay) -> list[np.ndarray]:
    """The prefills of target steps that may resume a stopped prefetch (module docstring): the first target step
    from a context where a draft step was accepted, ``r`` tokens reused (1 <= r < its tokens) on the cached
    context."""
    accepted = {rp.context[k] for k, a in enumerate(p.attempts) if a.by == DRAFT and a.verdict == ACCEPT}
    return [
        np.arange(1, a.tokens, dtype=np.int64) * _CTX_CODE + rp.context_tokens[j]
        for j, a in enumerate(p.attempts)
        if a.by == TARGET and a.tokens > 1 and rp.first_target_at_context[j] and rp.context[j] in accepted
    ]


def score_points(
    problems: Sequence[Problem], replays: Sequence[Replay], prm: TimedEngine, prefix_cache: bool
) -> np.ndarray:
    """The packed prefill points of the PRM passes scoring every attempt of ``problems`` (none if the PRM does
    not score with a prefill)."""
    steps = np.unique(
        np.fromiter(
            (
                a.tokens * _CTX_CODE + ctx
                for p, rp in zip(problems, replays, strict=True)
                for a, ctx in zip(p.attempts, rp.context_tokens)
            ),
            dtype=np.int64,
        )
    )
    points = (
        prm.score_prefill_point(n, c, prefix_cache)
        for n, c in zip((steps // _CTX_CODE).tolist(), (steps % _CTX_CODE).tolist())
    )
    return np.unique(np.array([n * _CTX_CODE + c for n, c in (pt for pt in points if pt is not None)], dtype=np.int64))


def steps(targets: Iterable[tuple[TimedEngine, Iterable[np.ndarray]]]) -> Iterator[int]:
    """Memoize, in each timed engine, the prefills at the packed points of its arrays (the union over its
    pairs), one engine per step; yields how many points each step computed (engines that do not fill prefill
    blocks compute none)."""
    by_engine: dict[int, tuple[TimedEngine, dict[int, np.ndarray]]] = {}
    for te, arrays in targets:
        parts = by_engine.setdefault(id(te), (te, {}))[1]
        parts.update((id(a), a) for a in arrays)  # an array shared by many units is merged once
    for te, parts in by_engine.values():
        if parts and te.plans_prefills:
            codes = np.unique(np.concatenate(list(parts.values())))
            yield te.prefill_points(codes // _CTX_CODE, codes % _CTX_CODE)


def warm(targets: Iterable[tuple[TimedEngine, Iterable[np.ndarray]]]) -> int:
    """All of :func:`steps` at once; returns how many points were computed."""
    return sum(steps(targets))
