"""The prefill pool's processes of the serving simulator (:class:`hwmodel.serving.simulator.Simulation`, steps 3-5
of its docstring): a prefill device's loop, a prompt's prefill with its layer-by-layer KV migration and first
token, and the device's own batched decode, step by step or one event per run of unchanged steps."""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np
import simpy

from hwmodel.des import call_after
from hwmodel.engine import Phase
from hwmodel.serving.state import BETWEEN, DECODE, FINISHING, IDLE, PREFILL, Device, ReqState
from hwmodel.serving.transfer import migrate

_PRUNE_ABOVE = 256  # link calendars drop past intervals once a direction holds more than this many
_GPU_CHUNK_STEPS = 64  # batched GPU decode: step times are evaluated this many steps ahead at most


class PrefillPool:
    """Methods of :class:`~hwmodel.serving.simulator.Simulation` (its state: ``env``, ``cluster``, devices,
    link calendar) for the devices of the prefill pools."""

    # ------------------------------------------------------------------------------------------ GPU
    def _prefill_loop(self, g: Device) -> Any:
        env = self.env
        while True:
            if g.pending:
                rs, dest = g.pending.pop(0)
                yield from self._prefill(g, rs, dest)
            elif g.batch:
                yield from self._batch_decode(g)
            else:
                g.state = IDLE
                g.wake = env.event()
                yield g.wake

    def _prefill(self, g: Device, rs: ReqState, dest: Device | None) -> Any:
        env = self.env
        g.state = PREFILL
        t0 = env.now
        rs.t_prefill_start = t0
        migrating = dest is not None and dest is not g
        if migrating:
            kv_dst = dest.model.kv_bytes(rs.prompt_tokens)
            plan = g.model.prefill_plan(rs.prompt_tokens, dest.model.kv_bits)
            path = self._paths.get((g.index, dest.index)) or self.path(g, dest)
            rs.path_kind = path.kind
            calendar = self.calendar
            calendar.prune(t0, path.keys, min_kept=_PRUNE_ABOVE)
            mig = migrate(
                calendar, path, kv_dst, plan.ready_array, host_free_s=plan.host_done_s, start_s=t0, memo_key=plan
            )
            rs.t_kv_ready = max(mig.kv_ready_s, t0 + plan.busy_s)  # usable once the prefill is done
            rs.kv_bytes_moved = kv_dst
            dest.phase_s[Phase.TRANSFER] += mig.dst_busy_s
        else:
            plan = g.model.prefill_plan(rs.prompt_tokens)
            rs.path_kind = "local"
        busy_s = plan.busy_s
        yield env.timeout(busy_s)
        g.state = BETWEEN
        i = bisect.bisect_left(self._avail_idx, g.index)  # free to prefill again (at most one prefill is pending)
        self._avail_idx.insert(i, g.index)
        self._avail.insert(i, g)
        g.phase_s[Phase.PREFILL] += busy_s
        if self.record:
            g.segments.append((t0, env.now, "prefill", (rs.id,)))
        rs.t_prefill_end = env.now
        if dest is None:
            rs.t_first_token = env.now
            g.free(rs.gpu_stage_bytes)
            self._finish(rs)
        elif dest is g:  # joins the GPU's own decode batch; its first token is sampled on the GPU
            rs.t_first_token = rs.t_kv_ready = rs.t_decode_start = env.now
            g.joining.remove(rs)
            g.batch.append(rs)
        else:
            logits_s, to_fpga = self._token_hops(g, dest)
            rs.t_first_token = env.now + g.model.link.latency_s + logits_s + g.host_sampling_s
            start = max(rs.t_kv_ready, rs.t_first_token + to_fpga)
            self._pool_decode_soon(dest, rs, start)
            self._release_at(g, rs.gpu_stage_bytes, rs.t_kv_ready)
        self.kick()

    def _token_hops(self, g: Device, dest: Device) -> tuple[float, float]:
        """(logits of the first token over ``g``'s link, after its latency; the token id's latency to ``dest``),
        per device pair."""
        key = (g.index, dest.index)
        hops = self._hops.get(key)
        if hops is None:
            link = g.model.link
            hops = self._hops[key] = (
                self.vocab * self._logit_bytes(g) / link.effective_bw_bytes_per_s,
                dest.model.link.latency_s
                + (self.cluster.network.latency_s if dest.node != g.node and self.cluster.network else 0.0),
            )
        return hops

    def _logit_bytes(self, d: Device) -> int:
        return self.cluster.spec.nodes[d.node].host.logits_bytes_per_value

    def _release_at(self, d: Device, n_bytes: int, t_s: float) -> None:
        """Free ``n_bytes`` of ``d``'s memory at ``t_s`` (the GPU's copy of a prompt's KV, once migrated)."""

        def release(_event: Any) -> None:
            d.free(n_bytes)
            self.kick()

        call_after(self.env, max(0.0, t_s - self.env.now), release)

    def _step_ends(self, g: Device, n: int) -> np.ndarray:
        """End times (relative) of the next ``n`` decode steps of ``g``'s batch (plus the per-token round trip to
        the host on a host-sampled device)."""
        if len(g.batch) == 1:
            ends = g.model.table.cumulative_from(g.batch[0].ctx, n)
        else:
            n = min(n, _GPU_CHUNK_STEPS)
            base = [r.ctx for r in g.batch]
            ends = np.cumsum([g.model.decode_batch_s([c + j for c in base]) for j in range(n)])
        if g.token_overhead_s > 0.0:
            ends = ends + g.token_overhead_s * np.arange(1, len(ends) + 1)
        return ends

    def _batch_decode(self, g: Device) -> Any:
        env = self.env
        n = 1 if self.per_token else min(r.steps_left for r in g.batch)
        ends = self._step_ends(g, n)
        t0 = env.now
        g.state = DECODE
        g.interrupted = False
        done = len(ends)
        try:
            yield env.timeout(float(ends[-1]))
        except simpy.Interrupt:
            elapsed = env.now - t0
            done = int(np.searchsorted(ends, elapsed, side="right"))
            at_boundary = elapsed == 0.0 or (done > 0 and ends[done - 1] == elapsed)
            if not at_boundary:  # the step in flight completes before the GPU switches
                g.state = FINISHING
                yield env.timeout(float(ends[done]) - elapsed)
                done += 1
        g.state = BETWEEN
        g.interrupted = False
        if done == 0:
            return
        g.phase_s[Phase.DECODE] += env.now - t0
        if self.record:
            g.segments.append((t0, env.now, "decode", tuple(r.id for r in g.batch)))
        finished = []
        for r in g.batch:
            r.ctx += done
            r.steps_left -= done
            r.steps_prefill_pool += done
            if r.steps_left == 0:
                finished.append(r)
        if finished:
            for r in finished:
                g.batch.remove(r)
                self._finish(r)
            g.rebalance_batch_memory()
            self.kick()
