"""Any engine in any role (issue 14): engines declare what they can do, roles refuse a device that lacks a
capability with the role, device and capability named, and a policy, a back-end or a board is one new file."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from hwmodel.engine import PROTOCOLS, Capability, MissingCapabilityError, capabilities, require
from hwmodel.errors import SpecError
from hwmodel.reasoning.metrics import summarize
from hwmodel.reasoning.runner import run_trace
from hwmodel.reasoning.system import SYSTEMS_DIR, build_platform, load_system
from hwmodel.registry import load_plugin
from hwmodel.workload.generator import generate

ROOT = Path(__file__).resolve().parents[1]


def _declared_and_implemented(engine: object) -> None:
    caps = capabilities(engine)
    assert caps, f"{type(engine).__name__} declares no capabilities"
    for cap in caps:
        assert isinstance(engine, PROTOCOLS[cap]), f"{type(engine).__name__} declares {cap.value} but lacks it"


def test_every_engine_class_implements_what_it_declares() -> None:
    from fpga.instruction.engine import InstructionEngine
    from fpga.streaming.engine import StreamingEngine
    from gpu.latency import GpuEngine
    from hwmodel.sampled import ContextSampledEngine

    gpu = GpuEngine("rtx3090", "qwen2.5-0.5b", framework="vllm-eager")
    edge = GpuEngine("orin-nano", "qwen2.5-0.5b", framework="edge-w8a8")
    stream = StreamingEngine("draft-u280", clock_hz=200e6)
    instr = InstructionEngine("draft-instr-u280")
    for e in (
        gpu,
        edge,
        stream,
        instr,
        ContextSampledEngine(stream, 16),
        ContextSampledEngine(instr, 16, prefill="engine"),
    ):
        _declared_and_implemented(e)
    assert Capability.SCORER in capabilities(gpu) and Capability.SCORER not in capabilities(stream)
    assert list(stream.decode_steps_s(40, 3)) == [stream.decode_s(c) for c in (40, 41, 42)]


def test_gpu_memory_facts_agree_with_what_it_refuses() -> None:
    from gpu.latency import DoesNotFitError, GpuEngine

    eng = GpuEngine("rtx3090", "qwen2.5-math-7b", framework="vllm-eager")
    room = (eng.memory_capacity_bytes - eng.resident_bytes) // eng.kv_bytes(1)
    eng.prefill_s(int(room) - 10)
    with pytest.raises(DoesNotFitError):
        eng.prefill_s(int(room) + 10)


_BACKEND = '''
import dataclasses
from hwmodel.backends import BACKENDS, Device
from hwmodel.engine import Capability, Phase


class DecodeOnly:
    """A device that decodes and prefills but can neither ingest nor score."""

    CAPABILITIES = frozenset({Capability.DECODER, Capability.PREFILLER, Capability.POWERED})

    def __init__(self, llm):
        self.name = f"decode-only:{llm}"

    def decode_s(self, ctx):
        return 1e-3 + 1e-7 * ctx

    def decode_steps_s(self, ctx0, n):
        import numpy as np
        return np.array([self.decode_s(ctx0 + i) for i in range(n)])

    def prefill_s(self, n, ctx=0):
        return 1e-3 * n

    def power_w(self, phase):
        return 10.0


@dataclasses.dataclass(frozen=True)
class DecodeOnlyBackend:
    name: str = "decode-only"

    def build(self, entry, llm, where):
        return Device(engine=DecodeOnly(llm), display_name="decode-only box", host_link="pcie-gen3-x16",
                      board="u280", kv_bits=8, warm_ctx=0)


BACKENDS.register("decode-only", DecodeOnlyBackend(), replace=True)
'''


def _system_with(tmp_path: Path, extra: str, **roles: str) -> object:
    """config1 with ``extra`` devices and the given role placements, as a new file (load_system memoizes by path)."""
    text = (SYSTEMS_DIR / "config1.toml").read_text()
    for role, dev in roles.items():
        text = re.sub(rf'^{role} = {{ value = "server"', f'{role} = {{ value = "{dev}"', text, count=1, flags=re.M)
    path = tmp_path / f"sys{len(list(tmp_path.glob('sys*.toml')))}.toml"
    path.write_text(text.replace('name = "config1"', 'name = "test-sys"') + textwrap.dedent(extra))
    return load_system(str(path))


_BOX = """
[devices.box]
backend = { value = "decode-only", source = "test plugin" }
attach = { value = "host-driven", source = "test" }
"""


def test_a_role_refuses_a_device_without_a_capability_it_needs(tmp_path: Path) -> None:
    (tmp_path / "backend.py").write_text(_BACKEND)
    load_plugin(tmp_path / "backend.py")  # a back-end is one file too
    system = _system_with(tmp_path, _BOX, prm="box")
    with pytest.raises(MissingCapabilityError, match=r"role 'prm' needs capability 'scorer'.*decode-only"):
        build_platform(system, "baseline")
    system = _system_with(tmp_path, _BOX)
    with pytest.raises(MissingCapabilityError, match=r"devices\.box.*role 'draft' needs capability 'ingester'"):
        build_platform(system, "heteroreason", draft="box")
    build_platform(system, "heteroreason-reprefill", draft="box")  # re-prefill needs no ingest: accepted
    with pytest.raises(SpecError, match=r"devices\.h200\.attach.*host-driven"):
        build_platform("config1", "heteroreason", draft="h200")  # a model server cannot hold a resident draft
    with pytest.raises(MissingCapabilityError, match="role 'x' needs capability 'scorer'"):
        require(object(), [Capability.SCORER], "x")


def test_a_policy_is_one_new_file(tmp_path: Path) -> None:
    (tmp_path / "late_t2.py").write_text(
        textwrap.dedent("""
        from hwmodel.reasoning.policies import register
        from hwmodel.reasoning.policies.base import Policy

        register(Policy("late-t2", "+T2 late", "T2 whose target starts at submission, on the edge board",
                        step_ahead=True, sync="prefix-cache", draft_device="edge", prefetch_at="submit"),
                 replace=True)
    """)
    )
    from hwmodel.reasoning.policies import POLICIES, REGISTRY

    load_plugin(tmp_path / "late_t2.py")
    try:
        assert "late-t2" in POLICIES
        trace = generate("gsm8k", "qwen2.5-math-7b", True, limit=4)
        pf = build_platform("config1", "late-t2")
        assert "Jetson" in pf.device_names["draft"]
        s = summarize(run_trace(trace, "late-t2", pf, "config1"))
        assert s.problems == 4 and s.latency_total_s > 0
    finally:
        REGISTRY.unregister("late-t2")


def test_a_policy_with_new_behaviour_is_one_new_file(tmp_path: Path) -> None:
    """A policy whose draft catches up differently (a host hold after each re-prefill) is one file: it overrides a
    hook, and the replay -- which knows no policy by name -- runs it."""
    (tmp_path / "held_reprefill.py").write_text(
        textwrap.dedent("""
        import dataclasses
        from hwmodel.reasoning.policies import register
        from hwmodel.reasoning.policies.base import Policy

        CALLS = []

        @dataclasses.dataclass(frozen=True)
        class HeldReprefill(Policy):
            hold_s: float = 0.05

            def catch_up(self, sim, op, ctx_tokens):
                super().catch_up(sim, op, ctx_tokens)  # re-prefill the target's step, then hold the draft
                sim.draft_ready_s += self.hold_s
                CALLS.append(op.n)

        register(HeldReprefill("held-reprefill", "+T2+T1 held", "re-prefill, then a host hold",
                               step_ahead=True, sync="reprefill", draft_device="fpga"), replace=True)
    """)
    )
    from hwmodel.reasoning.policies import REGISTRY

    module = load_plugin(tmp_path / "held_reprefill.py")
    try:
        trace = generate("gsm8k", "qwen2.5-math-7b", True, limit=6)
        ref = summarize(
            run_trace(trace, "heteroreason-reprefill", build_platform("config1", "heteroreason-reprefill"), "config1")
        )
        held = summarize(run_trace(trace, "held-reprefill", build_platform("config1", "held-reprefill"), "config1"))
        synced = [
            a.tokens for p in trace.problems for j, a in enumerate(p.attempts) if a.by == "target" and not a.final
        ]
        assert module.CALLS == synced and synced  # the hook ran once per target step the draft built upon
        assert held.latency_total_s > ref.latency_total_s  # and its behaviour reached the timeline
        assert held.problems == ref.problems == 6
    finally:
        REGISTRY.unregister("held-reprefill")


def test_a_board_is_one_new_file(tmp_path: Path) -> None:
    from fpga.streaming.engine import StreamingEngine
    from hwmodel.engine import Phase
    from hwmodel.specs import set_extra_spec_dirs

    board = (ROOT / "fpga/boards/u280.toml").read_text()
    board = board.replace('name = "u280"', 'name = "u280-cool"').replace(
        "static_power_w = { value = 37.3,", "static_power_w = { value = 21.0,"
    )
    (tmp_path / "boards").mkdir()
    (tmp_path / "boards" / "u280-cool.toml").write_text(board)
    design = (ROOT / "fpga/designs/draft-u280.toml").read_text()
    design = design.replace('name = "draft-u280"', 'name = "draft-cool"').replace(
        'board = "u280"', 'board = "u280-cool"'
    )
    (tmp_path / "draft-cool.design.toml").write_text(design)
    set_extra_spec_dirs([tmp_path / "boards"])
    try:
        eng = StreamingEngine(str(tmp_path / "draft-cool.design.toml"), clock_hz=200e6)
        assert eng.power_w(Phase.IDLE) == 21.0
        system = _system_with(
            tmp_path,
            f'''
            [devices.cool]
            backend = {{ value = "streaming", source = "test" }}
            design = {{ value = "{tmp_path / "draft-cool.design.toml"}", source = "test" }}
            clock_hz = {{ value = 200e6, source = "test" }}
            attach = {{ value = "host-driven", source = "test" }}
            ''',
        )
        pf = build_platform(system, "heteroreason", draft="cool")
        assert pf.draft.power_w(Phase.IDLE) == 21.0
    finally:
        set_extra_spec_dirs([])


def test_no_device_kind_decisions_in_system_a() -> None:
    """The issue's check: nothing under hwmodel/reasoning asks what kind of device a role runs on."""
    pat = re.compile(r"draft_on|kind ==|isinstance\(.*Engine|hasattr\(")
    hits = [
        f"{p}:{i}"
        for p in sorted((ROOT / "hwmodel/reasoning").rglob("*.py"))
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if pat.search(line)
    ]
    assert hits == []


def test_a_dse_evaluator_registers_itself_from_one_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hwmodel.dse import evaluators

    plugin = tmp_path / "my_eval.py"
    plugin.write_text(
        textwrap.dedent("""
        from hwmodel.dse.evaluators import register
        from hwmodel.dse.streaming_eval import EVALUATOR
        register(EVALUATOR, "clone-decode")
    """)
    )
    monkeypatch.setenv("HWMODEL_PLUGINS", str(plugin))
    try:
        assert "clone-decode" in evaluators.names()
        assert evaluators.resolve(evaluators.canonical_ref("clone-decode")).name == "streaming-decode"
    finally:
        evaluators.EVALUATORS.unregister("clone-decode")
