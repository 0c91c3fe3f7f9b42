"""The decode pool's processes of the serving simulator (:class:`hwmodel.serving.simulator.Simulation`, step 5 of
its docstring): a request decoded start to finish on one decode-pool device as one timed event (prefix sums of the
memoized per-context step times plus the per-token host round trips), or prefilled and decoded there when the
cluster has no prefill pool."""

from __future__ import annotations

from typing import Any

from hwmodel.des import call_after, call_soon
from hwmodel.engine import Phase
from hwmodel.serving.state import DECODE, IDLE, PREFILL, Device, ReqState


class DecodePool:
    """Methods of :class:`~hwmodel.serving.simulator.Simulation` (its state: ``env``, ``cluster``, devices) for
    the devices of the decode pools."""

    # ------------------------------------------------------------------------------------------ FPGA
    def _assign_local(self, rs: ReqState, f: Device) -> None:
        self._reserve(f, rs)
        f.alloc(f.model.kv_bytes(rs.final_ctx))
        rs.prefill_dev = rs.decode_dev = f.index
        rs.path_kind = "local"
        self.env.process(self._local_prefill_decode(f, rs))

    def _local_prefill_decode(self, f: Device, rs: ReqState) -> Any:
        env = self.env
        rs.t_prefill_start = env.now
        busy_s = f.model.prefill_plan(rs.prompt_tokens).busy_s
        f.state = PREFILL
        yield env.timeout(busy_s)
        f.phase_s[Phase.PREFILL] += busy_s
        if self.record:
            f.segments.append((rs.t_prefill_start, env.now, "prefill", (rs.id,)))
        rs.t_prefill_end = rs.t_kv_ready = env.now
        f.state = IDLE
        link = f.model.link
        rs.t_first_token = (
            env.now
            + link.latency_s
            + self.vocab * self._logit_bytes(f) / link.effective_bw_bytes_per_s
            + f.host_sampling_s
        )
        if rs.steps_left == 0:
            f.free(f.model.kv_bytes(rs.final_ctx))
            self._unreserve(f)
            self._finish(rs, rs.t_first_token)
            self.kick()
            return
        yield from self._pool_decode(f, rs, rs.t_first_token + link.latency_s)

    def _pool_decode(self, f: Device, rs: ReqState, start_s: float) -> Any:
        """A decode-pool device decodes ``rs`` from ``start_s`` to its last token (a process step; the reference
        with one event per token)."""
        env = self.env
        if start_s > env.now:
            yield env.timeout(start_s - env.now)
        t0, n = self._pool_decode_begin(f, rs)
        if self.per_token:
            for _ in range(n):
                yield env.timeout(f.model.table.step_s(rs.ctx) + f.token_overhead_s)
                rs.ctx += 1
        else:
            yield env.timeout(f.model.table.steps_s(rs.ctx, n) + n * f.token_overhead_s)
            rs.ctx += n
        self._pool_decode_end(f, rs, t0, n)

    def _pool_decode_soon(self, f: Device, rs: ReqState, start_s: float) -> None:
        """:meth:`_pool_decode` as a chain of event callbacks instead of a process (the fast path: a million
        requests make a million processes otherwise). Its events are scheduled exactly as a new process's would
        be (an urgent first step now, then the same timeouts), so every run books the same order of events."""
        if self.per_token:
            self.env.process(self._pool_decode(f, rs, start_s))
            return
        env = self.env

        def wait(_event: Any) -> None:
            if start_s > env.now:
                call_after(env, start_s - env.now, run)
            else:
                run(None)

        def run(_event: Any) -> None:
            t0, n = self._pool_decode_begin(f, rs)

            def end(_event: Any) -> None:
                rs.ctx += n
                self._pool_decode_end(f, rs, t0, n)

            call_after(env, f.model.table.steps_s(rs.ctx, n) + n * f.token_overhead_s, end)

        call_soon(env, wait)

    def _pool_decode_begin(self, f: Device, rs: ReqState) -> tuple[float, int]:
        f.state = DECODE
        rs.t_decode_start = t0 = self.env.now
        return t0, rs.steps_left

    def _pool_decode_end(self, f: Device, rs: ReqState, t0: float, n: int) -> None:
        env = self.env
        rs.steps_left = 0
        rs.steps_decode_pool += n
        f.phase_s[Phase.DECODE] += env.now - t0
        if self.record:
            f.segments.append((t0, env.now, "decode", (rs.id,)))
        f.state = IDLE
        f.free(f.model.kv_bytes(rs.final_ctx))
        self._unreserve(f)
        self._finish(rs)
        self.kick()
