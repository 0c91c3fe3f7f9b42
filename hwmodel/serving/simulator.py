"""Discrete-event simulator of a prefill-pool / decode-pool serving cluster (system B, GLITCHES-style), on SimPy.

Every device belongs to a role: the *prefill pool* or the *decode pool* of its node (cluster.py). In the published
GLITCHES node the prefill pool is one GPU and the decode pool seven instruction-driven U280s, but any engine with
the capabilities a role needs may take it (engines.py); nothing here asks what a device is. What happens to a
request (MISSION.md section B):

1. It arrives and waits in the scheduler's queue.
2. It is *placed* when a prefill device and a decode destination are both free: a prefill device that is not
   prefilling (one busy decoding is preempted at its next step boundary, as iteration-level schedulers do) and a
   free decode-pool device whose memory holds the weights plus this request's whole KV cache (``prompt + output
   - 1`` tokens, reserved up front, as a server without paging reserves ``max_tokens``). If every decode-pool
   device is busy (or none fits), a prefill device with room in its decode batch and memory takes the request and
   decodes it itself. A cluster without a prefill pool prefills on the decode-pool device that will decode.
   Requests wait when memory is short.
3. The prefill device prefills the prompt (the engine's prefill timeline when it declares one) and quantizes each
   layer's KV cache to the decoder's precision (one memory-bound kernel per layer; the convention of
   :func:`interconnect.pcie.kv_migration`). Layer i's KV leaves as soon as layer i is done, over the cluster's path
   (host-staged or peer-to-peer, across the network when the decoder is on another node), through link calendars
   shared with other migrations (see :mod:`.transfer`).
4. The first token comes from the prefill's logits, sent to the host and sampled there; its id goes to the
   decoder, which starts once the whole KV cache has arrived and it has that id.
5. Each decode step of a decode-pool device is the engine's ``decode_s(ctx)`` at the step's context, plus -- on a
   host-sampled device (an FPGA) -- logits -> host over PCIe, host sampling, token id -> device. A decode-pool
   device decodes one request at a time, start to finish, so its decode is one timed event: a prefix sum of the
   memoized per-context times plus the per-token round trips. A prefill device decodes its own batch step by step
   (``decode_batch_s``; the per-context table at batch 1); a run of steps with unchanged membership is one event,
   cut short at a step boundary when a prefill preempts it or a request joins. With ``per_token_events`` every
   step is its own event (the reference the fast path is tested against).

Every request completes exactly once; tokens are conserved (``output - 1`` decode steps per request); a device runs
one thing at a time (a prefill and its device's decode steps never overlap; a decode-pool device holds one
request); device memory never exceeds its capacity. The tests check these over random streams and clusters.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from typing import Any

import simpy

from hwmodel.des import call_after, call_soon, run_to_end
from hwmodel.errors import HwmodelError
from hwmodel.serving.cluster import ResolvedCluster
from hwmodel.serving.decode_pool import DecodePool
from hwmodel.serving.devices import DeviceFactory, EngineFactory
from hwmodel.serving.prefill_pool import PrefillPool
from hwmodel.serving.schedulers import Scheduler, Slo, make_scheduler
from hwmodel.serving.state import BETWEEN, DECODE, IDLE, PREFILL, Device, ReqState, SimResult
from hwmodel.serving.transfer import LinkCalendar, Path, build_path
from hwmodel.specs import SpecLibrary, library
from hwmodel.workload.requests import Request


class _GpuNodes(AbstractSet[int]):
    """The nodes that have a prefill-pool device free to prefill a prompt now (free and with memory for its KV
    cache), for :meth:`Scheduler.pick_decoder`; membership is decided per node when asked, so placing a request
    costs what the scheduler looks at, not a scan of every node."""

    __slots__ = ("_sim", "_prompt", "_memo")

    def __init__(self, sim: Simulation, prompt_tokens: int) -> None:
        self._sim = sim
        self._prompt = prompt_tokens
        self._memo: dict[int, bool] = {}

    def __contains__(self, node: object) -> bool:
        v = self._memo.get(node)  # type: ignore[call-overload]
        if v is None:
            gpus = self._sim._node_prefillers.get(node, ())  # type: ignore[call-overload]
            v = self._memo[node] = bool(Simulation._prefill_room(gpus, self._prompt, check_free=True))  # type: ignore[index]
        return v

    def __iter__(self) -> Iterator[int]:
        return (n for n in sorted(self._sim._node_prefillers) if n in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


class Simulation(PrefillPool, DecodePool):
    """One run of a request stream on a cluster under a scheduler (set-up, arrivals and placement here; the
    prefill pool's and the decode pool's processes in :mod:`.prefill_pool` and :mod:`.decode_pool`)."""

    def __init__(
        self,
        cluster: ResolvedCluster,
        requests: Sequence[Request],
        scheduler: Scheduler | str = "fcfs",
        *,
        slo: Slo | None = None,
        factory: DeviceFactory | None = None,
        lib: SpecLibrary | None = None,
        per_token_events: bool = False,
        record_segments: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.progress = progress  # called with (finished, total) every 1 % of the requests
        self.slo = slo or Slo()
        self.scheduler = make_scheduler(scheduler, self.slo) if isinstance(scheduler, str) else scheduler
        self.per_token = per_token_events
        self.record = record_segments or per_token_events
        self.lib = lib or library()
        self.env = simpy.Environment()
        self.calendar = LinkCalendar()
        self.devices = self._build_devices(factory or EngineFactory())
        self.prefillers = [d for d in self.devices if d.role == "prefill"]  # the prefill pools
        self.decoders = [d for d in self.devices if d.role == "decode"]  # the decode pools
        self.layers = cluster.llm.layers
        self.vocab = cluster.llm.vocab
        self.states = [ReqState(r) for r in requests]
        self._paths: dict[tuple[int, int], Path] = {}
        self._hops: dict[tuple[int, int], tuple[float, float]] = {}
        self._free_dec = list(self.decoders)  # decode-pool devices holding no request, by index
        self._free_idx = [d.index for d in self._free_dec]
        self._avail = list(self.prefillers)  # prefill-pool devices free to prefill (not prefilling, none pending)
        self._avail_idx = [g.index for g in self._avail]
        self._decoder_models = list({id(d.model): d.model for d in self.decoders}.values())
        self._node_prefillers: dict[int, list[Device]] = {}
        for g in self.prefillers:
            self._node_prefillers.setdefault(g.node, []).append(g)
        self._check_placeable()
        prefillers = list({id(d.model): d.model for d in (self.prefillers or self.decoders)}.values())
        self.scheduler.estimate_prefill_s = lambda rs: min(m.prefill_plan(rs.prompt_tokens).busy_s for m in prefillers)
        self.finished = 0
        self._progress_every = max(1, len(self.states) // 100)
        self._queued_prefill_only = 0  # queued requests with a single output token (they need no decoder)

    # ------------------------------------------------------------------------------------------ set-up
    def _build_devices(self, factory: DeviceFactory) -> list[Device]:
        """One :class:`Device` per card, prefill pools first in each node; every engine's capabilities are checked
        against its role (:func:`hwmodel.serving.engines.check_roles`) before anything runs."""
        from hwmodel.serving.engines import check_roles

        spec = self.cluster.spec
        where = spec.origin or spec.name
        models = {
            (i, role, j): factory.build(g, self.cluster.llm, self.lib, where, f"nodes[{i}].{role}[{j}]")
            for i, role, j, g in spec.groups()
        }
        check_roles(spec, models)
        devices: list[Device] = []
        for ni, node in enumerate(spec.nodes):
            host = node.host
            for role, pool in (("prefill", node.prefill), ("decode", node.decode)):
                k = 0
                for gi, group in enumerate(pool):
                    model = models[(ni, role, gi)]
                    for _ in range(group.count):
                        devices.append(Device(len(devices), f"{node.name}/{role}{k}", ni, model, role))
                        k += 1
            logits_bytes = self.cluster.llm.vocab * host.logits_bytes_per_value
            for d in devices:
                if d.node != ni:
                    continue
                link = d.model.link
                d.host_sampling_s = host.sampling_s_per_logit * self.cluster.llm.vocab  # one token on the host
                # per decoded token on a host-sampled device: logits -> host, sampling, token id -> device
                d.token_overhead_s = (
                    (
                        link.latency_s
                        + logits_bytes / link.effective_bw_bytes_per_s
                        + d.host_sampling_s
                        + link.latency_s
                        + host.token_id_bytes / link.effective_bw_bytes_per_s
                    )
                    if d.model.host_sampled
                    else 0.0
                )
        return devices

    def _check_placeable(self) -> None:
        """Refuse, up front and by request, a request that no device of the cluster could ever hold."""
        models = list({id(d.model): d.model for d in self.devices}.values())  # one check per kind of device
        pre = list({id(d.model): d.model for d in self.prefillers}.values())
        dec = list({id(d.model): d.model for d in self.decoders}.values())
        seen: set[tuple[int, int]] = set()
        for rs in self.states:
            if (rs.prompt_tokens, rs.output_tokens) in seen:
                continue
            seen.add((rs.prompt_tokens, rs.output_tokens))
            if pre:
                ok_prefill = any(m.weights_bytes + m.kv_bytes(rs.prompt_tokens) <= m.memory_bytes for m in pre)
                ok_decode = rs.steps_left == 0 or any(m.fits_alone(rs.final_ctx) for m in models)
            else:
                ok_prefill = ok_decode = any(m.fits_alone(rs.final_ctx) for m in dec)
            if not (ok_prefill and ok_decode):
                raise HwmodelError(
                    f"request {rs.id} ({rs.prompt_tokens} prompt + {rs.output_tokens} output tokens) fits on no "
                    f"device of cluster {self.cluster.spec.name}: its KV cache at {rs.final_ctx} tokens plus the "
                    f"{self.cluster.llm.name} weights exceed every device's memory"
                )

    def path(self, src: Device, dst: Device) -> Path:
        key = (src.index, dst.index)
        if key not in self._paths:
            self._paths[key] = build_path(
                self.cluster.spec.kv_path,
                src=src.index,
                dst=dst.index,
                src_node=src.node,
                dst_node=dst.node,
                src_link=src.model.link,
                dst_link=dst.model.link,
                network=self.cluster.network,
            )
        return self._paths[key]

    # ------------------------------------------------------------------------------------------ run
    def run(self) -> SimResult:
        for g in self.prefillers:
            g.proc = self.env.process(self._prefill_loop(g))
        self._arrivals()
        run_to_end(self.env)
        if self.finished != len(self.states):
            stuck = [rs.id for rs in self.states if not rs.done][:5]
            raise HwmodelError(
                f"simulation ended with {len(self.states) - self.finished} unfinished requests "
                f"(e.g. ids {stuck}); the cluster cannot serve them"
            )
        return SimResult(self.cluster.spec.name, self.scheduler.name, self.slo, self.states, self.devices, self.env.now)

    def _arrivals(self) -> None:
        """Every request joins the scheduler's queue at its arrival time (a chain of timed callbacks, ordered as a
        process that waits for each arrival would be)."""
        env = self.env
        states = self.states
        nxt = [0, False]  # the next request; whether its arrival time has just been waited for

        def arrive(_event: Any) -> None:
            i, waited = nxt
            while i < len(states):
                rs = states[i]
                if not waited and rs.arrival_s > env.now:
                    nxt[0], nxt[1] = i, True
                    call_after(env, rs.arrival_s - env.now, arrive)
                    return
                waited = False
                self.scheduler.push(rs, env.now)
                self._queued_prefill_only += rs.output_tokens == 1
                self.kick()
                i += 1
            nxt[0] = i

        call_soon(env, arrive)

    # ------------------------------------------------------------------------------------------ placement
    def kick(self) -> None:
        """Place queued requests while the scheduler offers one the cluster can take now."""
        sched = self.scheduler
        while len(sched):
            free = self._free_devices()
            if free is None:
                return
            placed = False
            for rs in sched.candidates(self.env.now):
                if self._place(rs, *free):
                    sched.remove(rs)
                    self._queued_prefill_only -= rs.output_tokens == 1
                    placed = True
                    break
                if sched.strict:
                    return
            if not placed:
                return

    def _reserve(self, f: Device, rs: ReqState) -> None:
        f.reserved = rs
        i = bisect.bisect_left(self._free_idx, f.index)
        del self._free_idx[i], self._free_dec[i]

    def _unreserve(self, f: Device) -> None:
        f.reserved = None
        i = bisect.bisect_left(self._free_idx, f.index)
        self._free_idx.insert(i, f.index)
        self._free_dec.insert(i, f)

    def _free_devices(self) -> tuple[list[Device], list[Device]] | None:
        """(GPUs free to prefill, FPGAs free to take a request), or None when nothing can start now."""
        fpgas = self._free_dec  # live: _place changes it only once it has placed a request
        if not self.prefillers:
            return ([], fpgas) if fpgas else None
        gpus = self._avail  # live, like ``fpgas``
        if not gpus:
            return None
        if (
            not fpgas
            and not self._queued_prefill_only
            and all(len(g.batch) + len(g.joining) >= g.model.max_decode_batch for g in gpus)
        ):
            return None  # no decode destination anywhere: nothing in the queue can start
        return gpus, fpgas

    def _fitting(self, fpgas: list[Device], ctx_tokens: int) -> list[Device]:
        """The free decode-pool devices that can hold a request ending at ``ctx_tokens`` (``fpgas`` itself when
        every kind of decoder can: one check per kind of device, not per device)."""
        ok = [m.fits_alone(ctx_tokens) for m in self._decoder_models]
        if all(ok):
            return fpgas
        if not any(ok):
            return []
        fit = {id(m) for m, y in zip(self._decoder_models, ok) if y}
        return [f for f in fpgas if id(f.model) in fit]

    @staticmethod
    def _prefill_room(gpus: Sequence[Device], prompt_tokens: int, check_free: bool = False) -> list[Device]:
        """Of ``gpus``, those with memory for a prompt's KV cache (and, with ``check_free``, free to prefill)."""
        return [
            g
            for g in gpus
            if g.mem_free() >= g.model.kv_bytes(prompt_tokens)
            and not (check_free and (g.state == PREFILL or g.pending))
        ]

    def _place(self, rs: ReqState, gpus: list[Device], fpgas: list[Device]) -> bool:
        """Start ``rs`` on free devices if the cluster rules (module docstring) allow it now."""
        fits = self._fitting(fpgas, rs.final_ctx)
        if not self.prefillers:
            if not fits:
                return False
            self._assign_local(rs, self.scheduler.pick_decoder(rs, fits, set()))
            return True
        prompt = rs.prompt_tokens
        if not any(g.mem_free() >= g.model.kv_bytes(prompt) for g in gpus):
            return False
        if rs.steps_left == 0:  # one output token: a prefill is all it needs
            g = min(self._prefill_room(gpus, prompt), key=lambda d: (len(d.batch), d.index))
            self._assign_prefill(rs, g, None, g.model.kv_bytes(prompt))
            return True
        if fits:
            f = self.scheduler.pick_decoder(rs, fits, _GpuNodes(self, prompt))
            # the GPU: one on the decoder's node if any (idle before decoding, then the smallest batch), else any
            near = self._prefill_room(self._node_prefillers.get(f.node, ()), prompt, check_free=True)
            g = (
                min(near, key=lambda d: (len(d.batch) > 0, len(d.batch), d.index))
                if near
                else min(self._prefill_room(gpus, prompt), key=lambda d: (len(d.batch) > 0, len(d.batch), d.index))
            )
            self._reserve(f, rs)
            f.alloc(f.model.kv_bytes(rs.final_ctx))
            self._assign_prefill(rs, g, f, g.model.kv_bytes(rs.prompt_tokens))
            return True
        # every FPGA busy (or too small): a GPU decodes the request itself if its batch and memory allow
        local = [
            g
            for g in self._prefill_room(gpus, prompt)
            if len(g.batch) + len(g.joining) < g.model.max_decode_batch
            and g.mem_free() >= g.batch_bytes_with(rs) - g.batch_bytes
            and self.scheduler.admit_batch_decode(g, rs)
        ]
        if not local:
            return False
        g = min(local, key=lambda d: (len(d.batch), d.index))
        g.joining.append(rs)
        g.rebalance_batch_memory()
        self._assign_prefill(rs, g, g, 0)
        return True

    def _assign_prefill(self, rs: ReqState, g: Device, dest: Device | None, gpu_bytes: int) -> None:
        g.alloc(gpu_bytes)
        rs.gpu_stage_bytes = gpu_bytes
        rs.prefill_dev = g.index
        rs.decode_dev = dest.index if dest is not None else -1
        g.pending.append((rs, dest))
        i = bisect.bisect_left(self._avail_idx, g.index)
        del self._avail_idx[i], self._avail[i]
        if g.state == IDLE:
            g.state = BETWEEN
            g.wake.succeed()
        elif g.state == DECODE and not g.interrupted:
            g.interrupted = True
            g.proc.interrupt()

    # ------------------------------------------------------------------------------------------ end
    def _finish(self, rs: ReqState, t_s: float | None = None) -> None:
        """``rs`` is complete at ``t_s`` (default now): its last token has been sampled."""
        rs.t_finish = self.env.now if t_s is None else t_s
        rs.done += 1
        self.finished += 1
        if self.progress is not None and self.finished % self._progress_every == 0:
            self.progress(self.finished, len(self.states))


def simulate(
    cluster: ResolvedCluster,
    requests: Sequence[Request],
    scheduler: str = "fcfs",
    *,
    slo: Slo | None = None,
    factory: DeviceFactory | None = None,
    per_token_events: bool = False,
    record_segments: bool = False,
) -> SimResult:
    """Run ``requests`` on ``cluster`` (see :class:`Simulation`)."""
    own = factory is None
    factory = factory or EngineFactory()
    res = Simulation(
        cluster,
        requests,
        scheduler,
        slo=slo,
        factory=factory,
        per_token_events=per_token_events,
        record_segments=record_segments,
    ).run()
    if own:
        factory.save()  # type: ignore[attr-defined]  # the default factory keeps its tables for the next run
    return res
