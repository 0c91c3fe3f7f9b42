"""How a system-A draft keeps up with the committed context: the behaviour behind a policy's ``sync`` mode.

A *draft sync* is a strategy object with three hooks the replay (:class:`hwmodel.reasoning.sim.ProblemSimulation`)
calls through its policy, never testing a mode's name:

* ``setup(sim)`` -- a SimPy sub-process run before the first step (a resident draft: the GPU prefills the prompt
  and its KV cache migrates to the draft's device once);
* ``draft_process(sim, op, wait_until_s)`` -- the SimPy process that generates a draft step (a request to the
  draft's model server, or decode passes on a device that keeps the draft's KV cache);
* ``catch_up(sim, op, ctx_tokens)`` -- the draft catches up with a target step whose tokens are all emitted.

Built-in modes (MISSION.md section A): ``prefix-cache`` (a model server: the next request prefills what is new),
``shadow`` (a resident draft ingests each of the target's tokens as it arrives, while the target still generates)
and ``reprefill`` (a resident draft waits for the whole step, then prefills it locally -- the vanilla alternative).
A policy with other behaviour subclasses :class:`hwmodel.reasoning.policies.base.Policy` and overrides the hook it
changes; the replay's primitives it may use are ``transfer``, ``record``, ``kv``, ``gpu_request`` and
``resident_step``.
"""

from __future__ import annotations

import abc
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import numpy as np

from hwmodel.engine import Capability, Phase
from hwmodel.reasoning.timeline import Transfer

if TYPE_CHECKING:
    from hwmodel.reasoning.generation import Generation
    from hwmodel.reasoning.sim import ProblemSimulation

_EPS = 1e-12


def shadow_schedule(free_s: float, arrive_s: np.ndarray, dur_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end of each token's ingest pass when token j arrives at ``arrive_s[j]``, takes ``dur_s[j]``, and
    the device is free from ``free_s``: ``end_j = max(end_{j-1}, arrive_j) + dur_j`` (a max-plus scan, solved as
    ``end_j = D_j + max_{k <= j}(arrive_k - D_{k-1})`` with ``D`` the running sum of durations)."""
    a = np.asarray(arrive_s, dtype=float).copy()
    a[0] = max(a[0], free_s)
    d_cum = np.cumsum(dur_s)
    d_prev = d_cum - dur_s
    end = d_cum + np.maximum.accumulate(a - d_prev)
    return end - dur_s, end


class DraftSync:
    """A draft served by a model server with prefix caching (``prefix-cache``): no set-up, each draft step is a
    request, and a target step reaches the draft with its next request."""

    name = "prefix-cache"
    resident = False  # the draft keeps the committed context's KV cache on its own (host-driven) device
    draft_needs: frozenset[Capability] = frozenset()  # capabilities the draft needs beyond the base set

    def setup(self, sim: ProblemSimulation) -> Generator[Any, Any, None]:
        """Nothing to prepare before the first step."""
        return
        yield  # a generator that yields nothing

    def draft_process(self, sim: ProblemSimulation, op: Generation, wait_until_s: float) -> Generator[Any, Any, None]:
        return sim.gpu_request(op, sim.pf.draft, sim.draft_cache, sim.pf.draft_api_call_overhead_s, wait_until_s)

    def catch_up(self, sim: ProblemSimulation, op: Generation, ctx_tokens: int) -> None:
        sim.transfer("target", "host", op.n * sim.pf.token_bytes, f"{op.label}: tokens" if sim.keep_log else "")


class ResidentSync(DraftSync, metaclass=abc.ABCMeta):
    """A draft that keeps its KV cache on its own device: the prompt's KV migrates once, steps are decode passes
    from it, and the KVMU follows every step. Subclasses say how a target step gets into the cache."""

    resident = True

    def setup(self, sim: ProblemSimulation) -> Generator[Any, Any, None]:
        """A GPU prefills the prompt with the draft model and the KV cache migrates once (overlapped)."""
        env = sim.env
        p = sim.problem.prompt_tokens
        x = sim.transfer("host", "target", p * sim.pf.token_bytes, "prompt to GPU")
        yield env.timeout(x + sim.pf.api_call_overhead_s)
        start = env.now
        mig = sim.pf.prompt_migration(p) if sim.pf.prompt_migration is not None else None
        if mig is None:
            from hwmodel.reasoning.sim import SimulationError

            raise SimulationError("a resident draft needs a prompt migration model (platform.prompt_migration)")
        sim.record(
            "target",
            start,
            start + mig.prefill_s,
            Phase.PREFILL,
            "draft prompt prefill (KV migration)",
            mig.prefill_power_w,
        )
        sim.comm_s += mig.transfer_s
        if sim.keep_log:
            sim.transfers.append(
                Transfer(
                    start,
                    start + mig.ready_s,
                    "target->host->draft",
                    mig.kv_bytes,
                    "draft KV migration (overlapped with the prefill)",
                )
            )
        yield env.timeout(mig.ready_s)
        sim.kv("init", p)
        sim.draft_ready_s = env.now

    def draft_process(self, sim: ProblemSimulation, op: Generation, wait_until_s: float) -> Generator[Any, Any, None]:
        return sim.resident_step(op, wait_until_s)

    def catch_up(self, sim: ProblemSimulation, op: Generation, ctx_tokens: int) -> None:
        free = max(sim.dev["draft"].free_at_s, sim.draft_ready_s)
        sim.draft_ready_s = self.ingest(sim, op, ctx_tokens, free)
        sim.kv("ingest", op.n)

    @abc.abstractmethod
    def ingest(self, sim: ProblemSimulation, op: Generation, ctx_tokens: int, free_s: float) -> float:
        """Put target step ``op`` into the draft's KV cache, the device free from ``free_s``; returns when the
        draft is ready to draft from the new context (each resident mode says how)."""


class ShadowSync(ResidentSync):
    """Shadow synchronization: each of the target's tokens crosses the link as it is emitted and the draft ingests
    it (a forward pass, logits discarded) while the target is still generating."""

    name = "shadow"
    draft_needs = frozenset({Capability.INGESTER})

    def ingest(self, sim: ProblemSimulation, op: Generation, ctx_tokens: int, free_s: float) -> float:
        tb = sim.pf.token_bytes
        n = op.n
        eng = sim.pf.draft
        t_tok = sim.pf.links.transfer_s("target", "draft", tb)  # each token as it is emitted
        sim.comm_s += n * t_tok
        arrive = np.asarray(op.emission_times()) + t_tok
        if sim.keep_log:
            sim.transfers.extend(
                Transfer(te - t_tok, te, "target->draft", tb, f"{op.label}: token {j}")
                for j, te in enumerate(arrive.tolist())
            )
        dur = eng.ingest_times(ctx_tokens, n)
        begin, end = shadow_schedule(free_s, arrive, dur)
        p_ing = eng.power_w(Phase.INGEST)
        label = f"shadow ingest ({op.label})"
        if sim.keep_log:  # one activity per run of back-to-back tokens
            gaps = np.nonzero(begin[1:] > end[:-1] + _EPS)[0]
            starts = np.concatenate([[0], gaps + 1])
            stops = np.concatenate([gaps, [n - 1]])
            for a, b in zip(starts.tolist(), stops.tolist()):
                sim.record("draft", float(begin[a]), float(end[b]), Phase.INGEST, label, p_ing)
        else:  # one window reserved on the device, busy only for the tokens' passes
            sim.dev["draft"].record_window(
                float(begin[0]), float(end[-1]), float(dur.sum()), Phase.INGEST, label, p_ing
            )
        return float(end[-1])


class ReprefillSync(ResidentSync):
    """Local re-prefill: the whole target step crosses the link once it is done and the draft prefills it."""

    name = "reprefill"

    def ingest(self, sim: ProblemSimulation, op: Generation, ctx_tokens: int, free_s: float) -> float:
        n = op.n
        label = f"{op.label}: tokens" if sim.keep_log else ""
        arrive = op.last_s + sim.transfer("target", "draft", n * sim.pf.token_bytes, label, op.last_s)
        begin = max(free_s, arrive)
        t_pre, p_pre = sim.pf.draft.prefill(n, ctx_tokens)
        end = begin + t_pre
        sim.record("draft", begin, end, Phase.PREFILL, f"re-prefill ({op.label})", p_pre)
        return end


#: the built-in sync modes by name (a policy names one with ``sync``)
SYNCS: dict[str, DraftSync] = {s.name: s for s in (DraftSync(), ShadowSync(), ReprefillSync())}
