"""Discrete-event replay of one problem of a reasoning trace under a policy (docs/reasoning.md), on a lean loop
with SimPy's semantics (:mod:`hwmodel.reasoning.events`, the default) or on SimPy itself, its reference twin
(``event_loop="simpy"``): the same events in the same order, so bit-identical outcomes.

The controller walks the trace's attempts in order; the trace fixes *what* happens (which steps are accepted,
rejected or backtracked, and their lengths), the policy and the device models fix *when*. Each device operation
is a SimPy process that records its activity on the device (:class:`~hwmodel.reasoning.timeline.Device`, which
refuses overlaps). Speculative work is interrupted with ``simpy.Interrupt`` when a verdict makes it useless, and
what it had produced by then is computed from the engine's per-token times.

Operations (``ctx`` = tokens before the step, ``n`` = the step's tokens, delimiter included):

* a GPU model request (vLLM server, prefix caching): API overhead, the context ids over the link, a prefill of the
  tokens not in the device's prefix cache (the first new token), then ``n - 1`` decode steps;
* a resident draft step (a host-driven accelerator keeping the draft's KV cache, e.g. the FPGA): ``n`` decode
  passes at ``ctx .. ctx + n - 1`` (memoized per context by the engine);
* a PRM verification: the step to the PRM, one prefill-only scoring pass (whole context unless the platform's PRM
  uses prefix caching), the verdict back;
* resident-draft synchronization after a target step: shadow (ingest each token as it arrives, while the target
  still generates) or re-prefill (wait for the whole step, then prefill it).

What the replay does is decided by the policy (:mod:`hwmodel.reasoning.policies`: speculation, prefetch, the
draft's sync mode) and by the platform's role properties (whether the host tells the draft's device each
verdict); it never asks what kind of device a role runs on.

Step-ahead (T2): after submitting a draft step the draft speculates the next one (depth one: it waits at the end of
that step for the verdict -- the *speculation stall*). The target, idle in the baseline except on rejections, works
on the step the draft is drafting: as soon as a step is committed (or, with backtracking, as soon as the target's
own step is written, without waiting for its verdict) it starts generating the next step from that context
(*asynchronous prefetch*). If the draft's version of that step is accepted the target's run is stopped and its
partial tokens are cached for the context; if it is rejected the run simply continues as the refinement, with a
head start. A later target step from a context whose run was stopped (a backtrack's alternative) reuses the cached
tokens (re-prefilled, since no KV is kept) if it is the first target step from that context (later ones are
different samples).

Lengths of speculative work that never commits (a step drafted after a step that is then rejected; a prefetch from
a context where the trace never has a target step) are not in the trace; the model takes the length of the next
draft step at that position, or the rejected step's own length (docs/reasoning.md).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import simpy

from hwmodel.des import run_to_end
from hwmodel.engine import Phase
from hwmodel.errors import HwmodelError
from hwmodel.reasoning import events
from hwmodel.reasoning.costs import TimedEngine
from hwmodel.reasoning.generation import Generation, PrefixCache
from hwmodel.reasoning.platform import Platform
from hwmodel.reasoning.policies import Policy
from hwmodel.reasoning.policies.sync import shadow_schedule  # noqa: F401 - re-exported
from hwmodel.reasoning.timeline import Activity, Device, Transfer
from hwmodel.reasoning.waste import invalidated
from hwmodel.workload.steps import MAX_CONTEXT_TOKENS
from hwmodel.workload.trace import ACCEPT, DRAFT, TARGET, Problem, Replay, TraceHeader, replay_of

_EPS = 1e-12
#: the event loops a replay runs on: the lean loop (:mod:`hwmodel.reasoning.events`, the default) and SimPy itself,
#: its reference twin (same events in the same order: bit-identical outcomes, tests/test_reasoning_events.py)
EVENT_LOOPS = {"lean": events.Environment, "simpy": simpy.Environment}


class SimulationError(HwmodelError):
    """The simulation found an inconsistency (e.g. the KVMU registers disagree with the committed tokens)."""


@dataclasses.dataclass
class ProblemOutcome:
    """Raw results of one simulated problem (metrics are derived in :mod:`hwmodel.reasoning.metrics`)."""

    latency_s: float  # until the final answer is committed
    span_s: float  # until every device is quiet again (a stopped forward pass may end after the commit)
    committed: tuple[tuple[int, int], ...]  # (attempt index, tokens) in answer order, as the policy committed them
    committed_tokens: int
    devices: dict[str, Device]
    transfers: list[Transfer]
    stall_s: float
    comm_s: float
    discarded_draft_tokens: int
    discarded_target_tokens: int
    discarded_energy_j: float
    reused_target_tokens: int
    kvmu_commands: int
    # the paper's narrower waste metric (hwmodel/reasoning/waste.py): work a PRM rejection invalidated
    invalidated_draft_tokens: int = 0
    invalidated_target_tokens: int = 0
    invalidated_energy_j: float = 0.0


@dataclasses.dataclass(slots=True)
class _ProblemPrep:
    """What a replay derives from the problem and its step-rule replay alone, whatever the policy and platform:
    computed once per problem and shared by every policy's replay of it in this process (values unchanged)."""

    problem: Problem
    replay: Replay
    tokens_memo: dict[tuple[int, ...], int]  # context -> its tokens (ProblemSimulation._tokens_of)
    next_draft_len: dict[int, int]  # step index -> the first draft attempt's length at that step
    first_target_at: dict[tuple[int, ...], int]  # context -> index of the first target attempt from it
    first_draft_at: dict[tuple[int, ...], int]  # context -> index of the first draft attempt from it
    mean_step: int


_PREPS: dict[tuple[int, int], _ProblemPrep] = {}
_PREPS_MAX = 1 << 16  # problems whose preparation is kept (a full study unit holds up to ~1,000 per trace)


def _problem_prep(problem: Problem, rp: Replay) -> _ProblemPrep:
    """The :class:`_ProblemPrep` of ``problem`` with replay ``rp`` (memoized by identity; the entry holds both, so
    an id is never reused while its entry lives)."""
    key = (id(problem), id(rp))
    prep = _PREPS.get(key)
    if prep is not None and prep.problem is problem and prep.replay is rp:
        return prep
    attempts = problem.attempts
    next_len: dict[int, int] = {}
    first: dict[str, dict[tuple[int, ...], int]] = {DRAFT: {}, TARGET: {}}
    for j, a in enumerate(attempts):
        if a.by == DRAFT and a.step not in next_len:
            next_len[a.step] = a.tokens
        at = first.get(a.by)
        if at is not None:
            at.setdefault(rp.context[j], j)
    mean = max(1, round(sum(a.tokens for a in attempts) / len(attempts)))
    if len(_PREPS) >= _PREPS_MAX:
        _PREPS.clear()
    prep = _PREPS[key] = _ProblemPrep(problem, rp, {}, next_len, first[TARGET], first[DRAFT], mean)
    return prep


class ProblemSimulation:
    """Replays one problem under one policy on one platform (module docstring)."""

    def __init__(
        self,
        problem: Problem,
        header: TraceHeader,
        policy: Policy,
        platform: Platform,
        keep_log: bool = False,
        replay: Replay | None = None,
        event_loop: str = "lean",
    ) -> None:
        self.problem = problem
        self.header = header
        self.policy = policy
        self.pf = platform
        self.rp = replay if replay is not None else replay_of(problem, header)
        self.attempts = problem.attempts
        self.keep_log = keep_log
        self.env: Any = EVENT_LOOPS[event_loop]()
        idle = {
            "draft": platform.draft.power_w(Phase.IDLE),
            "prm": platform.prm.power_w(Phase.IDLE),
            "target": platform.target.power_w(Phase.IDLE),
        }
        self.dev = {r: Device(platform.device_names[r], r, idle[r], keep_log) for r in ("draft", "prm", "target")}
        self.engine = {"draft": platform.draft, "prm": platform.prm, "target": platform.target}
        self.transfers: list[Transfer] = []
        self._transfer_s = platform.links.transfer_s
        # the links' own memo of transfer_s, read first (one call less per transfer); links without one: always called
        self._transfer_memo: dict[tuple[str, str, int], float] = getattr(platform.links, "memo", {})
        prep = _problem_prep(problem, self.rp)
        self._tokens_memo: dict[tuple[int, ...], int] = prep.tokens_memo
        self.comm_s = 0.0
        self.committed: list[int] = []
        self.target_cache = PrefixCache(self._tokens_of)
        self.draft_cache = PrefixCache(self._tokens_of)
        self.partial: dict[tuple[int, ...], int] = {}  # context -> target tokens cached from an interrupted prefetch
        self.partial_ops: dict[tuple[int, ...], Generation] = {}
        self.stall_s = 0.0
        self.discarded_draft_tokens = 0
        self.discarded_target_tokens = 0
        self.discarded_energy_j = 0.0
        self.reused_target_tokens = 0
        self.draft_ready_s = 0.0  # when the draft has the committed context in its KV and may draft
        self.target_free_s = 0.0  # when the target GPU has finished a stopped generation's last forward pass
        self._discarded_ops: list[Generation] = []  # generations whose work was thrown away (energy counted at the end)
        self.kvmu = platform.kvmu_factory() if (platform.kvmu_factory and policy.resident_draft) else None
        if self.kvmu is not None and platform.kvmu_clocked:  # co-simulation: commands at replay time
            self.kvmu.bind_clock(lambda: self.env.now)
        self.kvmu_commands = 0
        self.kvmu_log: list[tuple[float, int, int, int]] = []  # (time, valid, curr, ahead) after each command
        self._pending_accept = False  # KVMU: an accepted step whose accept command waits for the next step boundary
        self.end_s = 0.0
        self._next_draft_len = prep.next_draft_len
        self._first_target_at = prep.first_target_at
        self._first_draft_at = prep.first_draft_at
        self._mean_step = prep.mean_step

    # ------------------------------------------------------------------------------------------------ helpers
    def _tokens_of(self, key: tuple[int, ...]) -> int:
        t = self._tokens_memo.get(key)
        if t is None:
            t = self._tokens_memo[key] = self.problem.prompt_tokens + sum(self.attempts[j].tokens for j in key)
        return t

    def transfer(self, src: str, dst: str, n_bytes: int, label: str, start_s: float | None = None) -> float:
        """Time of a transfer, recorded (for the communication share) as starting at ``start_s`` (default now).
        ``label`` is read only with ``keep_log`` (callers on the hot path pass "" without a log)."""
        t = self._transfer_memo.get((src, dst, n_bytes))
        if t is None:
            t = self._transfer_s(src, dst, n_bytes)
        self.comm_s += t
        if self.keep_log:
            s = self.env.now if start_s is None else start_s
            self.transfers.append(Transfer(s, s + t, f"{src}->{dst}", n_bytes, label))
        return t

    def record(
        self, role: str, start: float, end: float, phase: Phase, label: str, power_w: float | None = None
    ) -> float:
        """Log an activity at ``power_w`` (default: the engine's power in ``phase``); returns its energy."""
        p = self.engine[role].power_w(phase) if power_w is None else power_w
        self.dev[role].record_window(start, end, end - start, phase, label, p)  # Device.record, one call less
        return p * max(0.0, end - start)

    def kv(self, cmd: str, *args: int) -> None:
        if self.kvmu is None:
            return
        getattr(self.kvmu, cmd)(*args)
        self.kvmu_commands += 1
        if self.keep_log:
            self.kvmu_log.append((float(self.env.now), int(self.kvmu.valid), int(self.kvmu.curr), int(self.kvmu.ahead)))

    def kv_check(self, what: str, valid: int, curr: int | None = None) -> None:
        if self.kvmu is None:
            return
        if self.kvmu.valid != valid or (curr is not None and self.kvmu.curr != curr):
            raise SimulationError(
                f"problem {self.problem.id}: KVMU after {what}: valid={self.kvmu.valid} "
                f"curr={self.kvmu.curr}, expected valid={valid}" + (f" curr={curr}" if curr is not None else "")
            )

    # ------------------------------------------------------------------------------------------------ operations
    def gpu_request(
        self, op: Generation, eng: TimedEngine, cache: PrefixCache | None, overhead_s: float, wait_until_s: float = 0.0
    ):  # noqa: ANN202 - SimPy process
        """A request to a GPU model server (module docstring); interruptible at forward-pass boundaries."""
        env = self.env
        if wait_until_s > env.now and not (yield from self._wait_to_start(op, wait_until_s)):
            return
        start = op.start_s = env.now
        label = f"{op.label}: context" if self.keep_log else ""  # transfer labels are kept only in a log
        x_in = self.transfer("host", op.role, (op.ctx_tokens + op.reuse) * self.pf.token_bytes, label)
        t0 = start + overhead_s + x_in
        if op.reuse >= op.n:
            op.k0, op.t0, op.compute_start_s = op.n, start, start
            op.produced, op.end_s, op.done = op.n, start, True
            return
        cached = cache.cached_tokens(op.ctx_key) if cache is not None else 0
        total_ctx = op.ctx_tokens + op.reuse
        n_pref = max(1, total_ctx - min(cached, op.ctx_tokens))
        t_pref, p_pref = eng.prefill(n_pref, total_ctx - n_pref)
        eng.decode_span_s(total_ctx, op.n - op.reuse - 1)  # make sure the table covers the generation
        first = t0 + t_pref
        op.compute_start_s = t0
        op.t0, op.k0, op.c0, op.cum = first, op.reuse + 1, total_ctx, eng.cum_table
        yield from self._run_until_done_or_stopped(op)
        end = op.end_s
        if end > t0:
            op.energy_j += self.record(op.role, t0, min(end, first), Phase.PREFILL, f"{op.label} (prefill)", p_pref)
        if end > first:
            steps = op.produced - op.reuse - 1
            e = eng.decode_energy_j(total_ctx, steps)
            op.energy_j += self.record(op.role, first, end, Phase.DECODE, op.label, e / (end - first))
        if cache is not None and end >= first - _EPS:
            cache.add(op.ctx_key)
            if op.produced >= op.n and op.attempt is not None:
                cache.add(op.ctx_key + (op.attempt,))
        op.done = True

    def _wait_to_start(self, op: Generation, wait_until_s: float):  # noqa: ANN202 - SimPy sub-process
        """Wait until ``wait_until_s`` (later than now: the callers start at once otherwise, without this
        sub-process); an interrupt before then cancels the operation (returns False)."""
        env = self.env
        try:
            yield env.timeout(wait_until_s - env.now)
        except simpy.Interrupt:
            op.start_s = op.end_s = env.now
            op.done = True
            return False
        return True

    def _run_until_done_or_stopped(self, op: Generation):  # noqa: ANN202 - SimPy sub-process
        """Wait for the last token; on an interrupt, run to the end of the forward pass in flight."""
        env = self.env
        try:
            yield env.timeout(op.last_s - env.now)
        except simpy.Interrupt:
            stop = op.stop_time(env.now)
            if stop > env.now:
                yield env.timeout(stop - env.now)
        op.end_s = env.now
        op.produced = op.produced_by(op.end_s)

    def resident_step(self, op: Generation, wait_until_s: float = 0.0):  # noqa: ANN202 - SimPy process
        """``n`` decode passes on a resident draft from context ``ctx``; interruptible at pass boundaries."""
        env = self.env
        if wait_until_s > env.now and not (yield from self._wait_to_start(op, wait_until_s)):
            return
        start = op.start_s = op.compute_start_s = env.now
        eng = self.pf.draft
        eng.decode_span_s(op.ctx_tokens, op.n)
        op.t0, op.k0, op.c0, op.cum = start, 0, op.ctx_tokens, eng.cum_table
        yield from self._run_until_done_or_stopped(op)
        if op.end_s > start:
            e = self.pf.draft.decode_energy_j(op.ctx_tokens, op.produced)
            op.energy_j += self.record("draft", start, op.end_s, Phase.DECODE, op.label, e / (op.end_s - start))
        op.done = True

    def _start_draft(self, op: Generation, wait_until_s: float = 0.0) -> Generation:
        op.proc = self.env.process(self.policy.draft_process(self, op, wait_until_s))
        return op

    def _start_target(self, op: Generation) -> Generation:
        op.proc = self.env.process(
            self.gpu_request(op, self.pf.target, self.target_cache, self.pf.api_call_overhead_s, self.target_free_s)
        )
        return op

    def _discard_spec(self, spec: Generation) -> None:
        """A speculated draft step became useless (its parent was rejected or backtracked): stop the draft."""
        stop, produced = self._halt(spec)
        self.draft_ready_s = max(self.draft_ready_s, stop, self.env.now)
        self.discarded_draft_tokens += produced
        self._discarded_ops.append(spec)
        if produced:
            self.kv("speculate", produced)

    def _halt(self, op: Generation) -> tuple[float, int]:
        """Tell a running generation to stop now: (when its device is free, tokens it will have produced)."""
        now = self.env.now
        if op.done:
            return (op.end_s if op.end_s is not None else now), op.produced
        stop = op.stop_time(now)
        produced = op.produced_by(stop)
        op.proc.interrupt()
        return stop, produced

    def _verify(self, i: int, ctx_tokens: int):  # noqa: ANN202 - SimPy sub-process
        """Send attempt ``i`` to the PRM, score it, bring the verdict back (one wait: nothing can interrupt it)."""
        env, pf, log = self.env, self.pf, self.keep_log
        a = self.attempts[i]
        tb = pf.token_bytes
        now = env.now
        src = "draft" if a.by == DRAFT else "target"
        t_in = self.transfer(src, "host", a.tokens * tb, f"step {i} to host" if log else "")
        t_in += self.transfer(
            "host", "prm", (ctx_tokens + a.tokens) * tb, f"step {i} to PRM" if log else "", now + t_in
        )
        t_in += pf.api_call_overhead_s
        score_s, power_w = pf.prm.score(a.tokens, ctx_tokens, pf.prm_prefix_cache)
        t_out = self.transfer("prm", "host", tb, f"verdict {i}" if log else "", now + t_in + score_s)
        if pf.draft_told_verdict:  # the host tells the draft's device (KVMU command / abort)
            label = f"verdict {i} to draft" if log else ""
            t_out += self.transfer("host", "draft", tb, label, now + t_in + score_s + t_out)
        self.record("prm", now + t_in, now + t_in + score_s, Phase.SCORE, f"score step {i} ({a.by})", power_w)
        yield env.timeout(t_in + score_s + t_out)

    def _cap(self, ctx_tokens: int, n: int) -> int:
        """A speculative length that stays inside the context cap (generation stops there)."""
        return max(1, min(n, MAX_CONTEXT_TOKENS - ctx_tokens))

    def _spec_length(self, i: int) -> tuple[int | None, int]:
        """(trace attempt, tokens) of the step the draft speculates after attempt ``i``."""
        a = self.attempts[i]
        if a.verdict == ACCEPT and i + 1 < len(self.attempts):
            return i + 1, self.attempts[i + 1].tokens
        ctx = self.rp.context_tokens[i] + a.tokens
        return None, self._cap(ctx, self._next_draft_len.get(a.step + 1, a.tokens))

    def _prefetch_length(self, key: tuple[int, ...], ctx_tokens: int) -> tuple[int | None, int]:
        """(trace attempt, tokens) of the target's step from context ``key``: the first target attempt from it
        in the trace, else (never needed) the draft's step from it or the next draft step at that position."""
        j = self._first_target_at.get(key)
        if j is not None:
            return j, self.attempts[j].tokens
        d = self._first_draft_at.get(key)
        n = self.attempts[d].tokens if d is not None else self._next_draft_len.get(len(key), self._mean_step)
        return None, self._cap(ctx_tokens, n)

    # ------------------------------------------------------------------------------------------------ controller
    def _commit(self, i: int) -> None:
        self.committed.append(i)

    def _start_prefetch(self, key: tuple[int, ...], at: str = "commit") -> Generation | None:
        """T2: the target starts the step after context ``key`` (module docstring), when the policy starts it at
        this moment (``at``: "commit" after a step is committed, "submit" when the draft submits the step)."""
        if not self.policy.prefetches_at(at) or self._answer_complete(key):
            return None
        ctx_tokens = self._tokens_of(key)
        j, n = self._prefetch_length(key, ctx_tokens)
        reuse = 0
        if j is not None and key in self.partial:  # a previous run from this context was stopped: reuse it
            reuse = min(self.partial.pop(key), n)
            self.partial_ops.pop(key, None)
            self.reused_target_tokens += reuse
        return self._start_target(Generation("target", key, ctx_tokens, n, j, f"target @step {len(key)}", reuse=reuse))

    def _answer_complete(self, key: tuple[int, ...]) -> bool:
        return bool(key) and self.attempts[key[-1]].final

    def _stop_prefetch(self, op: Generation, keep: bool) -> None:
        """Stop the target's run; ``keep``: its context is still valid, so cache its tokens for that context."""
        stop, produced = self._halt(op)
        self.target_free_s = max(self.target_free_s, stop)
        if keep and op.attempt is not None and produced > 0:
            self.partial[op.ctx_key] = produced
            self.partial_ops[op.ctx_key] = op
        else:
            self.discarded_target_tokens += produced
            self._discarded_ops.append(op)

    def _main(self):  # noqa: ANN202 - SimPy process
        """The controller: walks the trace's attempts in order (module docstring)."""
        yield from self.policy.setup(self)
        spec: Generation | None = None  # the draft's speculated next step, if any
        prefetch: Generation | None = self._start_prefetch(())  # the target's asynchronous prefetch, if any
        for i, a in enumerate(self.attempts):
            attempt = self._draft_attempt if a.by == DRAFT else self._target_attempt
            spec, prefetch = yield from attempt(i, spec, prefetch)
        if prefetch is not None:
            self._stop_prefetch(prefetch, keep=False)
        self.end_s = self.env.now

    def _draft_attempt(self, i: int, spec: Generation | None, prefetch: Generation | None):  # noqa: ANN202
        """Draft attempt ``i``: draft it (or take the speculated step), submit, verify, commit or roll back; returns
        the (speculation, prefetch) in flight afterwards."""
        env, pol, a = self.env, self.policy, self.attempts[i]
        ctx_key, ctx_tokens = self.rp.context[i], self.rp.context_tokens[i]
        if spec is not None and spec.attempt == i:
            op = spec
        else:
            if spec is not None:
                raise SimulationError(
                    f"problem {self.problem.id}: speculation for attempt {spec.attempt} still pending at attempt {i}"
                )
            op = self._start_draft(
                Generation("draft", ctx_key, ctx_tokens, a.tokens, i, f"draft step {i}"), self.draft_ready_s
            )
        spec = None
        yield from self._generated(op, i, "draft")
        # submit step i: the KVMU closes it (an accept held for the previous step carries the boundary)
        if self.kvmu is not None:
            self.kv("speculate", a.tokens)
            if self._pending_accept:
                self.kv("accept")
                self._pending_accept = False
            else:
                self.kv("mark")
            self.kv_check(f"submitting step {i}", ctx_tokens, ctx_tokens + a.tokens)
        submit = env.now
        if pol.speculates and not a.final:
            nxt, n_spec = self._spec_length(i)
            spec = self._start_draft(
                Generation("draft", ctx_key + (i,), ctx_tokens + a.tokens, n_spec, nxt, f"speculate step {a.step + 1}")
            )
        if prefetch is None:
            prefetch = self._start_prefetch(ctx_key, at="submit")
        yield from self._verify(i, ctx_tokens)
        self.stall_s += self._stall(spec, submit)
        if a.verdict == ACCEPT:
            self._commit(i)
            if prefetch is not None:  # the target's version of this step is not needed now
                self._stop_prefetch(prefetch, keep=True)
            prefetch = self._start_prefetch(ctx_key + (i,))
            if self.kvmu is not None:
                self._pending_accept = True
                if a.final:
                    self.kv("accept")
                    self._pending_accept = False
        else:
            if spec is not None:
                self._discard_spec(spec)
                spec = None
            if self.kvmu is not None:
                self.kv("rollback")
                self.kv_check(f"rejecting step {i}", ctx_tokens, ctx_tokens)
            self.draft_ready_s = max(self.draft_ready_s, env.now)
        return spec, prefetch

    def _target_attempt(self, i: int, spec: Generation | None, prefetch: Generation | None):  # noqa: ANN202
        """Target attempt ``i`` (the refinement of a rejected draft step, or an alternative after a backtrack):
        generate, let the draft catch up, verify with backtracking; returns the (speculation, prefetch) in flight
        afterwards."""
        env, pol, a, attempts, rp = self.env, self.policy, self.attempts[i], self.attempts, self.rp
        ctx_key, ctx_tokens = rp.context[i], rp.context_tokens[i]
        if prefetch is not None and prefetch.attempt == i:
            op = prefetch
        else:
            if prefetch is not None:
                self._stop_prefetch(prefetch, keep=prefetch.ctx_key == ctx_key)
            reuse = 0
            if rp.first_target_at_context[i] and ctx_key in self.partial:
                reuse = min(self.partial.pop(ctx_key), a.tokens)
                self.partial_ops.pop(ctx_key, None)
                self.reused_target_tokens += reuse
            label = "refine" if self.attempts[i - 1].by == DRAFT else "alternative"
            op = self._start_target(
                Generation("target", ctx_key, ctx_tokens, a.tokens, i, f"target {label} @step {a.step}", reuse=reuse)
            )
        prefetch = None
        yield from self._generated(op, i, "target")
        if not a.final:  # the answer's last step is never built upon: the draft need not catch up
            self.policy.catch_up(self, op, ctx_tokens)
            self.kv_check(f"ingesting target step {i}", ctx_tokens + a.tokens)
        else:
            self.transfer(
                "target", "host", a.tokens * self.pf.token_bytes, f"{op.label}: tokens" if self.keep_log else ""
            )
        if not self.header.backtracking:
            self._commit(i)
            return spec, self._start_prefetch(ctx_key + (i,))
        submit = env.now
        if pol.speculates and not a.final:
            nxt, n_spec = self._spec_length(i)
            spec = self._start_draft(
                Generation("draft", ctx_key + (i,), ctx_tokens + a.tokens, n_spec, nxt, f"speculate step {a.step + 1}"),
                self.draft_ready_s,
            )
        prefetch = self._start_prefetch(ctx_key + (i,))  # without waiting for the verdict
        yield from self._verify(i, ctx_tokens)
        self.stall_s += self._stall(spec, max(submit, self.draft_ready_s))
        if a.verdict == ACCEPT:
            self._commit(i)
        else:  # backtrack: drop this step and the previous committed one
            if spec is not None:
                self._discard_spec(spec)
                spec = None
            if prefetch is not None:
                self._stop_prefetch(prefetch, keep=False)
                prefetch = None
            popped = self.committed.pop()
            pos = ctx_tokens - attempts[popped].tokens
            if self.kvmu is not None:
                self.kv("init", pos)
            self.draft_ready_s = max(self.draft_ready_s, env.now)
        return spec, prefetch

    def _generated(self, op: Generation, i: int, who: str):  # noqa: ANN202 - SimPy sub-process
        """Wait for generation ``op`` of attempt ``i`` to end; it must have produced the attempt's tokens."""
        if not op.done:
            yield op.proc
        if op.produced != self.attempts[i].tokens:
            raise SimulationError(
                f"problem {self.problem.id}: {who} step {i} produced {op.produced} of {self.attempts[i].tokens} tokens"
            )

    def _stall(self, spec: Generation | None, idle_from_s: float) -> float:
        """Draft idle time waiting for the verdict that just arrived (now)."""
        now = self.env.now
        if spec is None:
            return max(0.0, now - max(idle_from_s, self.dev["draft"].free_at_s))
        if spec.done and spec.end_s is not None and spec.produced >= spec.n:
            return max(0.0, now - spec.end_s)
        return 0.0

    # ------------------------------------------------------------------------------------------------ run
    def run(self) -> ProblemOutcome:
        self.env.process(self._main())
        if isinstance(self.env, simpy.Environment):
            run_to_end(self.env)  # env.run(), one loop
        else:
            self.env.run()
        latency = self.end_s
        discarded_target = self.discarded_target_tokens + sum(self.partial.values())
        self.discarded_energy_j += sum(op.energy_j for op in self._discarded_ops)
        self.discarded_energy_j += sum(op.energy_j for op in self.partial_ops.values())
        seq = tuple((j, self.attempts[j].tokens) for j in self.committed)
        span = max([latency] + [d.free_at_s for d in self.dev.values()])
        inv = invalidated(self._discarded_ops, self.attempts)
        return ProblemOutcome(
            latency_s=latency,
            span_s=span,
            committed=seq,
            committed_tokens=sum(t for _j, t in seq),
            devices=self.dev,
            transfers=self.transfers,
            stall_s=self.stall_s,
            comm_s=self.comm_s,
            discarded_draft_tokens=self.discarded_draft_tokens,
            discarded_target_tokens=discarded_target,
            discarded_energy_j=self.discarded_energy_j,
            reused_target_tokens=self.reused_target_tokens,
            kvmu_commands=self.kvmu_commands,
            invalidated_draft_tokens=inv.draft_tokens,
            invalidated_target_tokens=inv.target_tokens,
            invalidated_energy_j=inv.energy_j,
        )

    def activities(self) -> dict[str, list[Activity]]:
        return {r: d.activities() for r, d in self.dev.items()}
