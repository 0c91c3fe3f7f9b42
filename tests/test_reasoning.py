"""System A policies replayed on traces: same commits under every policy, one activity per device at a time,
energy conservation, and the orderings the design implies. Engines here are small test engines with fixed
per-token times (defined in this file only); the real device models are exercised by the reproduction."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fpga.kvmu.model import Kvmu
from hwmodel.engine import Phase
from hwmodel.reasoning.costs import TimedEngine
from hwmodel.reasoning.metrics import summarize
from hwmodel.reasoning.platform import Platform, PromptMigration
from hwmodel.reasoning.policies import POLICIES
from hwmodel.reasoning.runner import run_trace, simulate_problem
from hwmodel.reasoning.timeline import Device, OverlapError
from hwmodel.workload.generator import generate
from hwmodel.workload.trace import (
    ACCEPT,
    BACKTRACK,
    DRAFT,
    REJECT,
    TARGET,
    Attempt,
    Problem,
    Trace,
    TraceHeader,
    replay_of,
)


# ------------------------------------------------------------------------------------------------ test doubles
@dataclasses.dataclass
class FixedEngine:
    """Test engine: affine per-token times, two power levels."""

    name: str
    decode_base_s: float
    prefill_per_token_s: float
    ingest_per_token_s: float = 1e-3
    busy_w: float = 200.0
    idle_w: float = 25.0

    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        return 0.004 + n_tokens * self.prefill_per_token_s + ctx * 1e-7

    def decode_s(self, ctx: int) -> float:
        return self.decode_base_s + ctx * 2e-7

    def ingest_s(self, n_tokens: int, ctx: int) -> float:
        return n_tokens * self.ingest_per_token_s

    def score_s(self, n_tokens: int, ctx: int, prefix_cache: bool = False) -> float:
        return self.prefill_s(n_tokens if prefix_cache else n_tokens + ctx)

    def power_w(self, phase: Phase) -> float:
        return self.idle_w if phase is Phase.IDLE else self.busy_w


class FixedLinks:
    def transfer_s(self, src: str, dst: str, n_bytes: int) -> float:
        hops = 1 if "host" in (src, dst) else 2
        return hops * 2e-6 + n_bytes / 12e9


def fixed_migration(n_tokens: int) -> PromptMigration:
    prefill = 0.004 + n_tokens * 2e-5
    transfer = 4e-6 + n_tokens * 6144 / 12e9
    return PromptMigration(
        prefill_s=prefill,
        prefill_power_w=150.0,
        ready_s=prefill + transfer / 4,
        transfer_s=transfer,
        kv_bytes=n_tokens * 6144,
    )


def make_platform(
    draft_device: str = "server", draft_speed: float = 1.0, prm_speed: float = 1.0, kvmu: bool = True
) -> Platform:
    """Test platform; ``draft_device`` as the policies name it: "server" (a GPU model server), "fpga" (a resident,
    host-driven draft), "edge" (a remote model server)."""
    resident = draft_device == "fpga"
    if resident:
        draft = FixedEngine("fpga", 0.0015 / draft_speed, 1e-4 / draft_speed, 1.5e-3 / draft_speed, 45.0, 30.0)
    else:
        draft = FixedEngine("gpu-draft", 0.010 / draft_speed, 2e-5 / draft_speed, busy_w=150.0)
    prm = FixedEngine("prm", 0.025 / prm_speed, 2.5e-4 / prm_speed, busy_w=300.0)
    target = FixedEngine("target", 0.025, 2.5e-4, busy_w=300.0)
    return Platform(
        draft=TimedEngine(draft),
        prm=TimedEngine(prm),
        target=TimedEngine(target),
        links=FixedLinks(),
        device_names={"draft": draft.name, "prm": "gpu-prm", "target": "gpu-target"},
        prompt_migration=fixed_migration,
        api_call_overhead_s=0.002,
        draft_api_call_overhead_s=0.0 if resident else 0.002,
        draft_told_verdict=draft_device != "server",
        kvmu_factory=(lambda: Kvmu(1 << 16)) if kvmu else None,
    )


def platform_for(policy: str, **kw) -> Platform:  # noqa: ANN003
    return make_platform(POLICIES[policy].draft_device, **kw)


def build_problem(decisions: list[tuple[bool, bool]], lengths: list[int], backtracking: bool) -> Problem:
    """A valid problem from (draft rejected?, target fails?) decisions (as in test_workload)."""
    attempts: list[Attempt] = []
    committed, backtracks, n_steps = 0, 0, len(lengths)
    it = iter(decisions)
    while committed < n_steps:
        rej, fail = next(it, (False, False))
        k = committed
        if not rej:
            attempts.append(Attempt(k, DRAFT, lengths[k], 0.9, ACCEPT, k == n_steps - 1))
            committed += 1
            continue
        attempts.append(Attempt(k, DRAFT, lengths[k], 0.3, REJECT, k == n_steps - 1))
        step = k
        while True:
            final = step == n_steps - 1
            if not backtracking:
                attempts.append(Attempt(step, TARGET, lengths[step] + 3, None, ACCEPT, final))
                committed += 1
                break
            if fail and committed > 0 and backtracks < 5:
                attempts.append(Attempt(step, TARGET, lengths[step] + 3, 0.2, BACKTRACK, final))
                backtracks, committed, step = backtracks + 1, committed - 1, step - 1
                rej, fail = next(it, (False, False))
                continue
            attempts.append(Attempt(step, TARGET, lengths[step] + 3, 0.2 if fail else 0.8, ACCEPT, final))
            committed += 1
            break
    return Problem("math500", "x", 60, True, tuple(attempts))


problems_st = st.tuples(
    st.lists(st.tuples(st.booleans(), st.booleans()), max_size=25),
    st.lists(st.integers(min_value=2, max_value=150), min_size=1, max_size=10),
    st.booleans(),
)


@pytest.fixture(scope="module")
def traces() -> dict[tuple[str, bool], Trace]:
    return {
        (d, bt): generate(d, "qwen2.5-math-7b", bt, limit=60)
        for d in ("math500", "olympiadbench")
        for bt in (False, True)
    }


# ------------------------------------------------------------------------------------------------ commits
@settings(max_examples=150)
@given(problems_st)
def test_every_policy_commits_the_traces_token_sequence(args: tuple) -> None:
    decisions, lengths, backtracking = args
    problem = build_problem(decisions, lengths, backtracking)
    header = TraceHeader(backtracking=backtracking)
    expected = replay_of(problem, header).committed_sequence(problem)
    for name in POLICIES:
        outcome, _sim = simulate_problem(problem, header, name, platform_for(name), keep_log=True)
        assert outcome.committed == expected, name
        assert outcome.committed_tokens == sum(t for _i, t in expected)


def test_generated_traces_commit_the_same_under_every_policy(traces: dict) -> None:
    for trace in traces.values():
        for name in POLICIES:
            pf = platform_for(name)
            for p in trace.problems:
                outcome, _ = simulate_problem(p, trace.header, name, pf)
                assert outcome.committed == replay_of(p, trace.header).committed_sequence(p), (name, p.id)


# ------------------------------------------------------------------------------------------------ devices
@settings(max_examples=80)
@given(problems_st)
def test_no_device_runs_two_things_at_once(args: tuple) -> None:
    decisions, lengths, backtracking = args
    problem = build_problem(decisions, lengths, backtracking)
    for name in POLICIES:
        outcome, sim = simulate_problem(
            problem, TraceHeader(backtracking=backtracking), name, platform_for(name), keep_log=True
        )
        for role, acts in sim.activities().items():
            for a, b in zip(acts, acts[1:]):
                assert a.end_s <= b.start_s + 1e-12, (name, role, a, b)
            assert all(0.0 <= a.start_s <= a.end_s <= outcome.span_s + 1e-12 for a in acts), (name, role)
            assert outcome.latency_s <= outcome.span_s


@settings(max_examples=50)
@given(st.floats(0, 1), st.lists(st.tuples(st.floats(0, 0.05), st.floats(1e-4, 0.02)), min_size=1, max_size=40))
def test_shadow_schedule_equals_the_token_by_token_recurrence(free: float, tokens: list) -> None:
    import numpy as np

    from hwmodel.reasoning.sim import shadow_schedule

    gaps, durs = zip(*tokens)
    arrive = np.cumsum(gaps)
    begin, end = shadow_schedule(free, arrive, np.array(durs))
    t = free
    for j, (a, d) in enumerate(zip(arrive, durs)):
        b = max(t, a)
        assert begin[j] == pytest.approx(b, abs=1e-12) and end[j] == pytest.approx(b + d, abs=1e-12)
        t = b + d


def test_device_refuses_overlapping_activities() -> None:
    dev = Device("gpu0", "prm", 25.0)
    dev.record(0.0, 1.0, Phase.SCORE, "a", 300.0)
    with pytest.raises(OverlapError, match="two things at once"):
        dev.record(0.5, 2.0, Phase.SCORE, "b", 300.0)
    dev.record(2.0, 2.5, Phase.SCORE, "c", 300.0)
    dev.record(1.5, 2.0, Phase.SCORE, "d (logged late, runs earlier)", 300.0)
    with pytest.raises(OverlapError, match="two things at once"):
        dev.record(1.2, 1.6, Phase.SCORE, "e", 300.0)
    assert [a.label[0] for a in dev.activities()] == ["a", "d", "c"]
    assert dev.energy_j(3.0) == pytest.approx(300.0 * 2.0 + 1.0 * 25.0)


def test_energy_is_every_device_over_the_whole_run(traces: dict) -> None:
    trace = traces[("math500", True)]
    for name in POLICIES:
        pf = platform_for(name)
        for p in trace.problems[:20]:
            outcome, sim = simulate_problem(p, trace.header, name, pf, keep_log=True)
            lat = outcome.span_s
            for dev in outcome.devices.values():
                busy = sum(a.busy_s for a in dev.log)
                active = sum(a.energy_j for a in dev.log)
                assert dev.energy_j(lat) == pytest.approx(active + dev.idle_power_w * (lat - busy), rel=1e-12)
                assert dev.energy_j(lat) >= dev.idle_power_w * lat * (1 - 1e-12)
            # the fast path (no activity log) accounts exactly the same
            quiet, _ = simulate_problem(p, trace.header, name, pf, keep_log=False)
            assert quiet.latency_s == outcome.latency_s and quiet.comm_s == pytest.approx(outcome.comm_s, rel=1e-12)
            for role in outcome.devices:
                assert quiet.devices[role].busy_s == pytest.approx(outcome.devices[role].busy_s, rel=1e-12)
                assert quiet.devices[role].energy_j(lat) == pytest.approx(
                    outcome.devices[role].energy_j(lat), rel=1e-12
                )


# ------------------------------------------------------------------------------------------------ orderings
def test_step_ahead_is_never_slower_than_the_baseline(traces: dict) -> None:
    for trace in traces.values():
        base = run_trace(trace, "baseline", platform_for("baseline"))
        t2 = run_trace(trace, "step-ahead", platform_for("step-ahead"))
        for b, s in zip(base, t2):
            assert s.latency_s <= b.latency_s + 1e-9, b.problem
        assert summarize(t2).stall_ratio < summarize(base).stall_ratio
        assert summarize(base).discarded_draft_tokens == summarize(base).discarded_target_tokens == 0


@pytest.mark.parametrize("policy", ["baseline", "step-ahead", "heteroreason", "heteroreason-reprefill"])
def test_faster_devices_never_make_a_problem_slower(policy: str, traces: dict) -> None:
    trace = traces[("olympiadbench", True)]
    slow = run_trace(trace, policy, platform_for(policy))
    fast_draft = run_trace(trace, policy, platform_for(policy, draft_speed=2.0))
    fast_prm = run_trace(trace, policy, platform_for(policy, prm_speed=2.0))
    for s, d, p in zip(slow, fast_draft, fast_prm):
        assert d.latency_s <= s.latency_s + 1e-9
        assert p.latency_s <= s.latency_s + 1e-9


def test_prefetched_tokens_are_reused_only_after_backtracks(traces: dict) -> None:
    for (ds, bt), trace in traces.items():
        rows = run_trace(trace, "step-ahead", platform_for("step-ahead"))
        reused = sum(r.reused_target_tokens for r in rows)
        if bt:
            assert reused > 0, ds
            assert all(r.reused_target_tokens == 0 for r in rows if r.backtracks == 0)
        else:
            assert reused == 0


def test_shadow_sync_keeps_the_fpga_in_step_with_the_kvmu(traces: dict) -> None:
    # the simulator checks the KVMU registers against the committed tokens after every command; the KVMU refuses
    # an illegal command (fpga.kvmu.model.CommandRefused), so a wrong command stream raises
    for trace in traces.values():
        for name in ("heteroreason", "heteroreason-reprefill"):
            pf = platform_for(name)
            for p in trace.problems:
                outcome, _ = simulate_problem(p, trace.header, name, pf)
                assert outcome.kvmu_commands >= 2


def test_replay_is_deterministic(traces: dict) -> None:
    trace = traces[("math500", True)]
    a = run_trace(trace, "heteroreason", platform_for("heteroreason"))
    b = run_trace(trace, "heteroreason", platform_for("heteroreason"))
    assert a == b


# ------------------------------------------------------------------------------------------------ reproduction
def test_reproduction_pipeline_writes_every_output_and_resumes(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    """The `reproduce heteroreason` pipeline on test platforms (the real device models run in the reproduction)."""
    import json

    import hwmodel.reasoning.reproduce as reproduce_mod
    import hwmodel.reasoning.study as study_mod
    from hwmodel.reasoning.reproduce import reproduce_heteroreason
    from hwmodel.report.tables import read_csv

    def test_builder(system: str, policy: str, **_kw) -> Platform:  # noqa: ANN003
        pf = platform_for(policy)
        pf.description = {"draft": pf.device_names["draft"], "prm": "gpu-prm", "target": "gpu-target"}
        return pf

    monkeypatch.setattr(study_mod, "build_platform", test_builder)
    monkeypatch.setattr(reproduce_mod, "build_platform", test_builder)
    monkeypatch.setattr(reproduce_mod, "BREAKEVEN_DESIGNS", ())  # speed points only (design points: real models)
    datasets = ("math500", "gsm8k")
    result, report = reproduce_heteroreason(tmp_path, datasets=datasets, limit=6, jobs=1)
    units = study_mod.study_units(datasets, study_mod.CONFIGS, study_mod.STUDY_POLICIES, study_mod.DRAFT_PLACEMENTS)
    assert len(units) == len(datasets) * (
        2 * len(study_mod.STUDY_POLICIES)
        - len(study_mod.FIRST_CONFIG_ONLY)
        + 2 * len(study_mod.DRAFT_PLACEMENTS)
        + 2 * len(study_mod.GPU_MODE_POLICIES)
    )
    variants = sum(
        1
        if (u.policy in study_mod.WITH_BACKTRACKING_ONLY or u.draft or study_mod.base_config(u.config) != u.config)
        else 2
        for u in units
    )
    assert len(result.rows) == variants * 6
    rows = read_csv(tmp_path / "problems.csv")
    assert len(rows) == len(result.rows)
    text = report.read_text()
    assert "1.25–1.33x" in text and "0.0123 %" in text
    assert any(w in text for w in ("| inside |", "| below |", "| above |"))
    assert (tmp_path / "ablation.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    timelines = sorted(tmp_path.glob("timeline_*.json"))
    assert len(timelines) == 3
    events = json.loads(timelines[-1].read_text())["traceEvents"]
    tracks = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert sum(t.startswith(("draft", "prm", "target")) for t in tracks) == 3
    assert len(list((tmp_path / "traces").glob("*.jsonl.gz"))) == len(datasets) * 2 * 2
    assert "Other draft devices" in text and "draft on fpga-instruction" in text
    for section in (
        "Backtracking, fitted on accuracy",
        "What backtracking costs",
        "Invalidated step-ahead energy",
        "Both drafts",
        "vLLM with CUDA graphs",
        "T1 break-even",
    ):
        assert section in text
    assert (tmp_path / "breakeven.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert read_csv(tmp_path / "breakeven.csv")
    outputs = {
        p.relative_to(tmp_path): p.read_bytes()
        for p in sorted(tmp_path.rglob("*"))
        if p.is_file() and p.name != "run.json"
    }
    again, _ = reproduce_heteroreason(tmp_path, datasets=datasets, limit=6, jobs=1, resume=True)
    assert again.resumed_units == len(units)
    assert again.rows == result.rows
    assert {
        p.relative_to(tmp_path): p.read_bytes()
        for p in sorted(tmp_path.rglob("*"))
        if p.is_file() and p.name != "run.json"
    } == outputs  # resumed: byte-identical outputs


# ------------------------------------------------------------------------------------------------ co-simulation
class FakeDraftModel:
    """The functional draft model's interface (fpga.functional.DraftModel) on a real recording KVMU; a decoded
    token is a function of its position, so the test can tell which tokens the KV cache should hold."""

    def __init__(self, capacity: int) -> None:
        from hwmodel.specs import library

        self.kvmu = Kvmu(capacity, record=True)
        self.capacity = capacity
        self.llm = library().llm("qwen2.5-0.5b")
        self._tok: dict[int, int] = {}

    def _put(self, positions, toks) -> None:  # noqa: ANN001
        for p, t in zip(positions, toks):
            self._tok[p] = t

    def prefill(self, toks: list[int]) -> None:
        self.kvmu.init(0)
        self._put(self.kvmu.ingest(len(toks)), toks)

    def ingest(self, toks: list[int]) -> None:
        self._put(self.kvmu.ingest(len(toks)), toks)

    def decode(self) -> int:
        tok = (self.kvmu.ahead * 7919) % self.llm.vocab
        self._put(self.kvmu.speculate(1), [tok])
        return tok

    def mark(self) -> None:
        self.kvmu.mark()

    def accept(self) -> None:
        self.kvmu.accept()

    def rollback(self) -> None:
        self.kvmu.rollback()

    def init(self, pos: int) -> None:
        self.kvmu.init(pos)

    valid = property(lambda self: self.kvmu.valid)
    curr = property(lambda self: self.kvmu.curr)
    ahead = property(lambda self: self.kvmu.ahead)
    tokens = property(lambda self: [self._tok[p] for p in range(self.kvmu.ahead)])


def test_cosimulation_drives_the_draft_model_and_writes_the_kvmu_waveform(tmp_path) -> None:  # noqa: ANN001
    from fpga.kvmu.vcd import read_vcd
    from hwmodel.reasoning.cosim import cosimulate

    problem = build_problem([(False, False), (True, False), (True, True), (False, False)], [12, 9, 15, 7, 5], True)
    header = TraceHeader(backtracking=True)
    model = FakeDraftModel(512)
    result = cosimulate(
        problem, header, platform_for("heteroreason"), model, clock_hz=200e6, vcd_path=tmp_path / "kvmu.vcd"
    )
    rp = replay_of(problem, header)
    assert result.outcome.committed == rp.committed_sequence(problem)
    # the KV cache ends holding the prompt and the committed answer; every drafted token came from the model
    assert model.valid == problem.prompt_tokens + rp.committed_tokens(problem)
    speculated = sum(a.tokens for a in problem.attempts if a.by == DRAFT) + result.outcome.discarded_draft_tokens
    assert len(result.drafted_tokens) == speculated
    committed_draft = [i for i in rp.committed if problem.attempts[i].by == DRAFT]
    assert committed_draft
    for i in committed_draft:  # the committed draft steps sit at their context's positions, as decoded there
        c = rp.context_tokens[i]
        for p in range(c, c + problem.attempts[i].tokens):
            assert result.kv_tokens[p] == (p * 7919) % model.llm.vocab
    waves = read_vcd(tmp_path / "kvmu.vcd")
    assert waves  # the waveform parses
    assert model.kvmu.cycle >= round(result.outcome.latency_s * 200e6) - 1  # commands placed at replay time
