"""Conservation: every back-end's compiled program moves exactly the graph's bytes per class and does exactly
its MACs (integers, no tolerance), for the built-in designs and LLMs and for hypothesis-generated LLM shapes x
contexts x quantization schemes; a deliberately broken lowering fails the same checks."""

from __future__ import annotations

import dataclasses

import pytest
from graph_gen import llm_shapes
from hypothesis import given, settings
from hypothesis import strategies as st

from fpga.streaming import lowering, program, program_format, templates
from fpga.streaming.design import load_design
from hwmodel.graph import Graph, QuantScheme, build_graph
from hwmodel.specs import LlmSpec, library


# ============================================================================================== streaming
def streaming_violations(prog: program_format.Program, g: Graph) -> list[str]:
    """Differences between a compiled streaming token and its graph (empty: conserved)."""
    out = []
    b = g.bytes
    led = prog.param_bytes
    for cls in ("weights", "metadata", "bias"):
        if led[cls] != getattr(b, cls):
            out.append(f"{cls}: program {led[cls]} != graph {getattr(b, cls)}")
    want = b.weights + b.metadata + b.bias + led["padding"]
    if prog.req_bytes["param_read"] != want:
        out.append(f"parameter reads: requests {prog.req_bytes['param_read']} != graph + padding {want}")
    if not 0 <= led["padding"] < max(1, led["pad_bound"]):
        out.append(f"padding {led['padding']} outside [0, {led['pad_bound']})")
    for cls in ("kv_read", "kv_write"):
        if prog.req_bytes[cls] != getattr(b, cls):
            out.append(f"{cls}: requests {prog.req_bytes[cls]} != graph {getattr(b, cls)}")
    if prog.macs != g.macs:
        out.append(f"MACs: program {prog.macs} != graph {g.macs}")
    return out


def _streaming_case(
    design_name: str, llm: LlmSpec, wb: int, kb: int, group: int, ctx: int, with_lm_head: bool
) -> tuple[program_format.Program, Graph]:
    d = load_design(design_name)
    d = dataclasses.replace(d, weight_bits=wb, kv_bits=kb, quant_group_size=group)
    board = d.board_spec()
    prog = program.compile_token(d, board, llm, ctx, with_lm_head)
    g = build_graph(llm, lowering.quant_of(d), "decode" if with_lm_head else "ingest", 1, ctx)
    return prog, g


@pytest.mark.parametrize("design", ["draft-u280", "draft-v80", "flexllm-u280"])
@pytest.mark.parametrize("ctx", [0, 1, 777])
def test_builtin_streaming_designs_conserve_the_graph(design: str, ctx: int) -> None:
    d = load_design(design)
    for head in (True, False):
        prog, g = _streaming_case(design, d.llm_spec(), d.weight_bits, d.kv_bits, 0, ctx, head)
        assert streaming_violations(prog, g) == []


@pytest.mark.parametrize("llm", sorted(library().names("llm")))
def test_builtin_llms_on_a_streaming_design_conserve_the_graph(llm: str) -> None:
    m = library().llm(llm)
    m = dataclasses.replace(m, layers=2)  # the layer is one template replicated: 2 layers check the replication
    prog, g = _streaming_case("draft-v80", m, 4, 8, 0, 33, True)
    assert streaming_violations(prog, g) == []


@settings(max_examples=220)
@given(
    llm_shapes(),
    st.sampled_from([4, 8, 16]),
    st.sampled_from([4, 8, 16]),
    st.sampled_from([0, 0, 8, 32]),
    st.integers(0, 400),
    st.booleans(),
    st.sampled_from(["draft-u280", "flexllm-u280"]),
)
def test_streaming_programs_conserve_the_graph(m, wb, kb, group, ctx, head, design) -> None:  # type: ignore[no-untyped-def]
    prog, g = _streaming_case(design, m, wb, kb, group, ctx, head)
    assert streaming_violations(prog, g) == []


class _SkipsVProj(lowering._Compiler):
    """A broken lowering: the fused QKV matrix leaves out the v projection."""

    def fused(self, op, part="layer"):  # type: ignore[no-untyped-def]
        return [o for o in super().fused(op, part) if o.name != "v_proj"]


class _MetadataTwice(lowering._Compiler):
    """A broken lowering: every row's scales are fetched twice (the ledger still says once)."""

    def shape(self, op, part="layer"):  # type: ignore[no-untyped-def]
        ops, rows, cols, segs = super().shape(op, part)
        meta = sum(o.bytes.metadata for o in ops) // rows if FUSED_ROWS(op) else 0
        return ops, rows, cols, [(n, rb + meta) for n, rb in segs]


def FUSED_ROWS(op: str) -> bool:  # noqa: N802
    return lowering.FUSION[op][1] == "rows"


@pytest.mark.parametrize("broken", [_SkipsVProj, _MetadataTwice])
def test_a_broken_streaming_lowering_fails_conservation(monkeypatch: pytest.MonkeyPatch, broken: type) -> None:
    d = load_design("draft-u280")
    monkeypatch.setattr(templates, "_Compiler", broken)  # templates._static_parts compiles every matrix
    templates.clear_caches()
    try:
        prog = program.compile_token(d, d.board_spec(), d.llm_spec(), 100)
        g = build_graph(d.llm_spec(), lowering.quant_of(d), "decode", 1, 100)
        assert streaming_violations(prog, g) != []
    finally:
        templates.clear_caches()


# ============================================================================================== instruction
from fpga.instruction import compiler as icomp  # noqa: E402
from fpga.instruction import layout as ilayout  # noqa: E402
from fpga.instruction import program as iprogram  # noqa: E402
from fpga.instruction.design import load_design as load_instruction_design  # noqa: E402


def instruction_violations(prog: iprogram.Program, g: Graph) -> list[str]:
    t = iprogram.program_traffic(prog)
    b = g.bytes
    emb = g.find("embed", "prologue").bytes
    want = {
        "weights": b.weights - emb.weights,
        "metadata": b.metadata - emb.metadata + b.bias,
        "gather": emb.weights + emb.metadata,
        "kv_read": b.kv_read,
        "kv_write": b.kv_write,
        "macs": g.macs,
    }
    return [f"{k}: program {t[k]} != graph {v}" for k, v in want.items() if t[k] != v]


@pytest.mark.parametrize("design", ["glitches-u280", "glitches-v80"])
@pytest.mark.parametrize("ctx", [0, 300])
def test_builtin_instruction_designs_conserve_the_graph(design: str, ctx: int) -> None:
    d = load_instruction_design(design)
    c = icomp.Compiler(d)
    q = ilayout.quant_of(d)
    assert instruction_violations(c.decode_program(ctx), build_graph(d.llm_spec, q, "decode", 1, ctx)) == []
    assert (
        instruction_violations(c.prefill_program(1, ctx, logits=False), build_graph(d.llm_spec, q, "ingest", 1, ctx))
        == []
    )


@pytest.mark.parametrize("llm", sorted(library().names("llm")))
def test_builtin_llms_on_an_instruction_design_conserve_the_graph(llm: str) -> None:
    m = dataclasses.replace(library().llm(llm), layers=2, max_position=1024)
    d = load_instruction_design("glitches-v80")
    c = icomp.Compiler(d, 1, llm=m)
    g = build_graph(m, ilayout.quant_of(d), "decode", 1, 200)
    assert instruction_violations(c.decode_program(200), g) == []


@settings(max_examples=200)
@given(
    llm_shapes(moe=False),
    st.sampled_from([4, 8, 16]),
    st.sampled_from([4, 8, 16]),
    st.sampled_from([8, 32, 128]),
    st.sampled_from([4, 8, 16]),
    st.integers(0, 200),
    st.booleans(),
)
def test_instruction_programs_conserve_the_graph(m, wb, kb, group, zb, ctx, head) -> None:  # type: ignore[no-untyped-def]
    m = dataclasses.replace(m, sliding_window=0, max_position=512)
    d = load_instruction_design("glitches-u280")
    d = d.with_params({"weight_bits": wb, "kv_bits": kb, "quant.group_size": group, "quant.zero_bits": zb})
    c = icomp.Compiler(d, 1, llm=m)
    q = ilayout.quant_of(d)
    if head:
        prog, g = c.decode_program(ctx), build_graph(m, q, "decode", 1, ctx)
    else:
        prog, g = c.prefill_program(1, ctx, logits=False), build_graph(m, q, "ingest", 1, ctx)
    assert instruction_violations(prog, g) == []


class _InsSkipsVProj(icomp.Compiler):
    def _linear_steps(self, em, name, *args, **kw):  # type: ignore[no-untyped-def]
        return [] if name == "v_proj" else super()._linear_steps(em, name, *args, **kw)


class _InsMetadataTwice(icomp.Compiler):
    def _linear_steps(self, *args, **kw):  # type: ignore[no-untyped-def]
        steps = super()._linear_steps(*args, **kw)
        for s in steps:
            s.loads += [dataclasses.replace(ld, row=list(ld.row)) for ld in s.loads if ld.buf == icomp.isa.BUF_SCALE]
        return steps


@pytest.mark.parametrize("broken", [_InsSkipsVProj, _InsMetadataTwice])
def test_a_broken_instruction_lowering_fails_conservation(broken: type) -> None:
    d = load_instruction_design("glitches-u280")
    g = build_graph(d.llm_spec, ilayout.quant_of(d), "decode", 1, 50)
    assert instruction_violations(icomp.Compiler(d).decode_program(50), g) == []
    assert instruction_violations(broken(d).decode_program(50), g) != []


# ============================================================================================== GPU kernels
from gpu import kernels as gk  # noqa: E402


def gpu_violations(prog: gk.Program, g: Graph) -> list[str]:
    out = []
    got = prog.param_bytes()
    for cls in gk.PARAM_CLASSES:
        if got[cls] != getattr(g.bytes, cls):
            out.append(f"{cls}: kernels {got[cls]} != graph {getattr(g.bytes, cls)}")
    ops = float(prog.total_ops()[0])
    if ops != 2 * g.macs:
        out.append(f"ops: kernels {ops} != 2 x graph MACs {2 * g.macs}")
    # the bytes the kernels move include every parameter byte once (plus activations and KV)
    if float(prog.total_bytes()[0]) < g.bytes.params:
        out.append("kernels move fewer bytes than the graph's parameters")
    return out


def _gpu_case(m: LlmSpec, framework: str, wb: int, kb: int, ctx: int, head: bool) -> tuple[gk.Program, Graph]:
    prog = gk.build_program(m, framework, gk.Pass.single(1, ctx), wb, kb, "auto" if head else "none")
    g = build_graph(m, QuantScheme(weight_bits=wb, kv_bits=kb), "decode" if head else "ingest", 1, ctx)
    return prog, g


@pytest.mark.parametrize("framework", ["hf", "vllm", "w8a8"])
@pytest.mark.parametrize("llm", sorted(library().names("llm")))
def test_builtin_llms_gpu_kernel_lists_conserve_the_graph(framework: str, llm: str) -> None:
    m = library().llm(llm)
    for wb in (16, 8):
        for head in (True, False):
            assert gpu_violations(*_gpu_case(m, framework, wb, 16, 500, head)) == []


@settings(max_examples=200)
@given(
    llm_shapes(moe=False),
    st.sampled_from(["hf", "vllm", "w8a8"]),
    st.sampled_from([4, 8, 16]),
    st.sampled_from([8, 16]),
    st.integers(0, 5000),
    st.booleans(),
)
def test_gpu_kernel_lists_conserve_the_graph(m, framework, wb, kb, ctx, head) -> None:  # type: ignore[no-untyped-def]
    m = dataclasses.replace(m, sliding_window=0)  # the GPU kernel lists do not apply a window
    assert gpu_violations(*_gpu_case(m, framework, wb, kb, ctx, head)) == []


def test_a_broken_gpu_lowering_fails_conservation(monkeypatch: pytest.MonkeyPatch) -> None:
    m = library().llm("qwen2.5-0.5b")
    assert gpu_violations(*_gpu_case(m, "vllm", 8, 16, 100, True)) == []
    gk.program_template.cache_clear()
    with monkeypatch.context() as mp:  # one projection skipped
        mp.setitem(gk.FUSION, "vllm", {**gk.FUSION["vllm"], "qkv_proj": ("q_proj", "k_proj")})
        assert gpu_violations(*_gpu_case(m, "vllm", 8, 16, 100, True)) != []
    gk.program_template.cache_clear()
    real = gk._gemm_ops

    def twice(b, name, ops, rows, act_in_bytes=gk.ACT_BYTES):  # type: ignore[no-untyped-def]
        real(b, name, ops, rows, act_in_bytes)
        w, meta, bias, norm = b.params[-1]
        b.params[-1] = (w, 2 * meta, bias, norm)  # metadata counted twice

    with monkeypatch.context() as mp:
        mp.setattr(gk, "_gemm_ops", twice)
        assert gpu_violations(*_gpu_case(m, "vllm", 8, 16, 100, True)) != []
    gk.program_template.cache_clear()


# ============================================================================================== README models
def test_readme_new_model_designs(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The MoE demonstration decodes and conserves its graph; the W8 Qwen3-8B is refused on U280 with numbers."""
    from pathlib import Path

    from fpga.streaming.design import DesignError
    from hwmodel.hf_import import import_hf
    from hwmodel.specs import SpecLibrary

    root = Path(__file__).resolve().parent.parent
    for name in ("qwen3-30b-a3b", "qwen3-8b"):
        import_hf(root / "tests" / "fixtures" / "hf" / f"{name}.json", name, tmp_path)
    from hwmodel.specs import set_extra_spec_dirs

    lib = SpecLibrary((tmp_path,))
    moe = lib.llm("qwen3-30b-a3b")
    set_extra_spec_dirs((tmp_path,))  # the design loader checks its LLM name against the library in use
    try:
        d = load_design(root / "examples" / "designs" / "qwen3-30b-a3b-w4-v80.toml")
        d8 = load_design(root / "examples" / "designs" / "qwen3-8b-w8-u280.toml")
    finally:
        set_extra_spec_dirs(())
    prog = program.compile_token(d, lib.board("v80"), moe, 64)
    g = build_graph(moe, lowering.quant_of(d), "decode", 1, 64)
    assert streaming_violations(prog, g) == []
    assert g.bytes.weights < resident_weights(moe) // 5  # 8 of 128 experts read per token
    with pytest.raises(DesignError, match=r"qwen3-8b does not fit HBM: .* needs \d+ MiB per port"):
        from fpga.streaming.engine import check_hbm_capacity

        check_hbm_capacity(d8, lib.board("u280"), lib.llm("qwen3-8b"))


def resident_weights(m: LlmSpec) -> int:
    from hwmodel.graph import resident_param_bytes

    return resident_param_bytes(m, QuantScheme(weight_bits=4, kv_bits=8)).weights
