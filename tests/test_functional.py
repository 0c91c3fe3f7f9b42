"""Bit-exactness of the JAX W8A8 draft model against the independent numpy reference (tests/test_functional_ref.py),
with the JAX side in a separate process and XLA limited to one thread; golden vectors pin both.

* every layer's int32 accumulators and int8 activations are identical for random prompts, also at a late position
  whose attention spans the whole decoded context;
* 256 greedy steps on a small config and 32 on the full Qwen2.5-0.5B shapes give identical tokens and identical
  integer logits at every step;
* the integer primitives agree on random and extreme int64 inputs (in-process, any thread count);
* ``tests/golden/functional_small.npz`` holds tokens, logits and digests of a fixed-seed run; both implementations
  must reproduce it. Regenerate it (from the numpy reference) with
  ``HWMODEL_REGEN_GOLDEN=1 python -m pytest tests/test_functional.py -k golden``.

Run as a script (``python tests/test_functional.py ARGS_JSON``), this file is the JAX worker the tests start.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden" / "functional_small.npz"
ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
SMALL_DIMS = {
    "name": "small-test",
    "layers": 3,
    "hidden": 64,
    "heads": 4,
    "kv_heads": 2,
    "head_dim": 16,
    "intermediate": 160,
    "vocab": 600,
}
SMALL_CAPACITY = 320
SMALL_STEPS = 256
FULL_STEPS = 32
TRACE_KEYS = (
    "x",
    "x_m",
    "x_e",
    "acc_qkv",
    "qkv",
    "k_q",
    "k_m",
    "k_e",
    "v_q",
    "v_m",
    "v_e",
    "q_q",
    "attn_out",
    "xo",
    "acc_o",
    "x2",
    "acc_gu",
    "xd",
    "acc_down",
    "h",
    "acc_pv",
)


def llm_from(dims: dict) -> object:
    """A built-in LLM (``{"base": name}``) or the Qwen2.5-0.5B spec with some shapes replaced."""
    from hwmodel.specs import library

    if "base" in dims:
        return library().llm(dims["base"])
    return dataclasses.replace(library().llm("qwen2.5-0.5b"), **dims)


def sha(a: np.ndarray) -> str:
    a = np.ascontiguousarray(np.asarray(a, np.int64))
    return hashlib.sha256(a.tobytes() + str(a.shape).encode()).hexdigest()


# ============================================================================================== the JAX worker
def _worker(args: dict) -> None:
    """Build the JAX model, run prompt + greedy steps (+ optional traces), save everything to ``args['out']``."""
    from fpga.functional.model import DraftModel

    llm = llm_from(args["dims"])
    cap = args["capacity"]
    m = DraftModel.from_synthetic(
        llm, seed=args["seed"], capacity=cap, decode_rows=args["rows"], prefill_chunk=args["rows"], min_window=cap
    )
    out: dict[str, np.ndarray] = {"params_digest": np.array(m.params.digest())}
    if args.get("trace_prompt"):
        tr = m.trace_forward(args["trace_prompt"])
        out.update({f"trace0/{k}": tr[k] for k in (*TRACE_KEYS, "xf", "xf_m", "xf_e", "h0", "logits", "acc_lm")})
        out.update({"trace0/acc_s": tr["acc_s"], "trace0/w_q": tr["w_q"]})
    m.prefill(args["prompt"])
    tokens, logit_sha, logits = [], [], []
    for step in range(args["steps"]):
        lg = m.logits(m.ahead - 1)
        logit_sha.append(sha(lg))
        if step < args.get("keep_logits", 0):
            logits.append(lg)
        tokens.append(m.decode())
    out.update(
        tokens=np.array(tokens),
        logit_sha=np.array(logit_sha),
        kv_sha=np.array([sha(v) for _k, v in sorted(m.kv_state().items())]),
    )
    if logits:
        out["logits"] = np.stack(logits)
    if args.get("trace_late"):
        tr = m.trace_forward(args["trace_late"], start=m.ahead)
        out.update({f"trace1/{k}": tr[k] for k in (*TRACE_KEYS, "xf", "logits", "acc_lm")})
        out.update({"trace1/acc_s": tr["acc_s"], "trace1/w_q": tr["w_q"]})
    np.savez(args["out"], **out)


def run_worker(tmp_path: Path, **args: object) -> dict[str, np.ndarray]:
    """Run :func:`_worker` in a fresh Python process with XLA on one thread."""
    out = tmp_path / "jax_out.npz"
    args["out"] = str(out)
    env = dict(os.environ, XLA_FLAGS=ONE_THREAD, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [sys.executable, __file__, json.dumps(args)], env=env, capture_output=True, text=True, timeout=900
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    with np.load(out) as z:
        return {k: z[k] for k in z.files}


# ============================================================================================== the numpy side
def ref_run(
    dims: dict,
    seed: int,
    capacity: int,
    prompt: list[int],
    steps: int,
    trace_prompt: list[int] | None,
    trace_late: list[int] | None,
    keep_logits: int = 0,
) -> dict:
    from test_functional_ref import RefModel

    from fpga.functional.weights import SyntheticWeights

    llm = llm_from(dims)
    out: dict = {}
    if trace_prompt:
        scratch = RefModel(llm, SyntheticWeights(llm, seed), capacity)
        out["trace0"] = [scratch.feed(t, p, collect=True) for p, t in enumerate(trace_prompt)]
        out["trace0_logits"] = [scratch.logits(p) for p in range(len(trace_prompt))]
    ref = RefModel(llm, SyntheticWeights(llm, seed), capacity)
    tokens, logits = ref.generate(prompt, steps)
    out.update(ref=ref, tokens=tokens, logit_sha=[sha(lg) for lg in logits], logits=logits[:keep_logits])
    if trace_late:
        start = len(prompt) + steps
        out["trace1"] = [ref.feed(t, start + i, collect=True) for i, t in enumerate(trace_late)]
        out["trace1_logits"] = [ref.logits(start + i) for i in range(len(trace_late))]
    return out


def compare_trace(jax_out: dict, prefix: str, recs: list[dict], ref_logits: list, start: int) -> None:
    """Every layer's internals, row by row (the JAX block holds the rows the reference fed one at a time)."""
    n_layers = len(recs[0]["layers"])
    for key in TRACE_KEYS:
        for li in range(n_layers):
            got = jax_out[f"{prefix}/{key}"][li]
            want = np.stack([np.asarray(r["layers"][li][key]) for r in recs])
            assert np.array_equal(got.reshape(want.shape), want), f"{prefix} layer {li} '{key}' differs"
    for li in range(n_layers):
        for row, rec in enumerate(recs):
            p = start + row
            for h, (acc_s, w_q) in enumerate(zip(rec["layers"][li]["acc_s"], rec["layers"][li]["w_q"])):
                assert np.array_equal(jax_out[f"{prefix}/acc_s"][li][row, h, : p + 1], acc_s), (
                    f"{prefix} layer {li} row {row} head {h}: attention score accumulators differ"
                )
                assert np.array_equal(jax_out[f"{prefix}/w_q"][li][row, h, : p + 1], w_q), (
                    f"{prefix} layer {li} row {row} head {h}: int8 attention weights differ"
                )
    assert np.array_equal(jax_out[f"{prefix}/xf"], np.stack([r["xf"] for r in recs]))
    assert np.array_equal(jax_out[f"{prefix}/acc_lm"], np.stack([a for _lg, a in ref_logits]))
    assert np.array_equal(jax_out[f"{prefix}/logits"], np.stack([lg for lg, _a in ref_logits]))


# ============================================================================================== small config
SMALL_SEED = 0
SMALL_PROMPT = [3, 17, 99, 4, 250, 7, 8, 9, 511, 42]


def _random_tokens(n: int, vocab: int, seed: int) -> list[int]:
    return [int(t) for t in np.random.default_rng(seed).integers(0, vocab, n)]


@pytest.fixture(scope="module")
def small_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    trace_prompt = _random_tokens(7, SMALL_DIMS["vocab"], 11)
    trace_late = _random_tokens(5, SMALL_DIMS["vocab"], 12)
    jax_out = run_worker(
        tmp_path_factory.mktemp("small"),
        dims=SMALL_DIMS,
        seed=SMALL_SEED,
        capacity=SMALL_CAPACITY,
        rows=2,
        prompt=SMALL_PROMPT,
        steps=SMALL_STEPS,
        trace_prompt=trace_prompt,
        trace_late=trace_late,
        keep_logits=2,
    )
    ref = ref_run(
        SMALL_DIMS, SMALL_SEED, SMALL_CAPACITY, SMALL_PROMPT, SMALL_STEPS, trace_prompt, trace_late, keep_logits=2
    )
    return jax_out, ref


def test_every_layer_identical_for_a_random_prompt(small_runs: tuple[dict, dict]) -> None:
    jax_out, ref = small_runs
    compare_trace(jax_out, "trace0", ref["trace0"], ref["trace0_logits"], start=0)
    assert np.array_equal(jax_out["trace0/h0"], np.stack([r["h0"] for r in ref["trace0"]]))


def test_every_layer_identical_over_a_long_context(small_runs: tuple[dict, dict]) -> None:
    """Rows at positions 266..270 attend over the prompt and all 256 decoded tokens."""
    jax_out, ref = small_runs
    compare_trace(jax_out, "trace1", ref["trace1"], ref["trace1_logits"], start=len(SMALL_PROMPT) + SMALL_STEPS)


def test_256_greedy_steps_identical(small_runs: tuple[dict, dict]) -> None:
    jax_out, ref = small_runs
    assert jax_out["tokens"].tolist() == ref["tokens"]
    assert jax_out["logit_sha"].tolist() == ref["logit_sha"]
    assert len(set(ref["tokens"])) > 20, "the synthetic model should not collapse onto a few tokens"


def ref_kv_sha(ref: dict, n: int) -> list[str]:
    r = ref["ref"]
    want = {
        "k_q": r.kq[:, :n],
        "k_m": r.ks[:, :n, :, 0],
        "k_e": r.ks[:, :n, :, 1],
        "v_q": r.vq[:, :n],
        "v_m": r.vs[:, :n, :, 0],
        "v_e": r.vs[:, :n, :, 1],
        "x_q": r.xf[:n],
        "x_m": r.xs[:n, 0],
        "x_e": r.xs[:n, 1],
    }
    return [sha(v) for _k, v in sorted(want.items())]


def test_kv_cache_identical(small_runs: tuple[dict, dict]) -> None:
    jax_out, ref = small_runs
    assert jax_out["kv_sha"].tolist() == ref_kv_sha(ref, len(SMALL_PROMPT) + SMALL_STEPS)


def _digest_of(shas: list[str]) -> str:
    return hashlib.sha256("".join(shas).encode()).hexdigest()


def test_golden_vectors(small_runs: tuple[dict, dict]) -> None:
    jax_out, ref = small_runs
    ref_acc_qkv = np.stack(
        [np.stack([rec["layers"][li]["acc_qkv"] for rec in ref["trace0"]]) for li in range(SMALL_DIMS["layers"])]
    )
    if os.environ.get("HWMODEL_REGEN_GOLDEN"):
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(
            GOLDEN,
            prompt=np.array(SMALL_PROMPT),
            tokens=np.array(ref["tokens"]),
            logits_first=np.stack(ref["logits"]),
            logit_digest=np.array(_digest_of(ref["logit_sha"])),
            kv_sha=np.array(ref_kv_sha(ref, len(SMALL_PROMPT) + SMALL_STEPS)),
            trace0_acc_qkv_sha=np.array(sha(ref_acc_qkv)),
        )
    with np.load(GOLDEN) as z:
        golden = {k: z[k] for k in z.files}
    assert golden["prompt"].tolist() == SMALL_PROMPT
    # the numpy reference reproduces the golden run...
    assert golden["tokens"].tolist() == ref["tokens"]
    assert np.array_equal(golden["logits_first"], np.stack(ref["logits"]))
    assert str(golden["logit_digest"]) == _digest_of(ref["logit_sha"])
    assert golden["kv_sha"].tolist() == ref_kv_sha(ref, len(SMALL_PROMPT) + SMALL_STEPS)
    assert str(golden["trace0_acc_qkv_sha"]) == sha(ref_acc_qkv)
    # ... and so does the JAX model, from its own process
    assert golden["tokens"].tolist() == jax_out["tokens"].tolist()
    assert np.array_equal(golden["logits_first"], jax_out["logits"])
    assert str(golden["logit_digest"]) == _digest_of(jax_out["logit_sha"].tolist())
    assert golden["kv_sha"].tolist() == jax_out["kv_sha"].tolist()
    assert str(golden["trace0_acc_qkv_sha"]) == sha(jax_out["trace0/acc_qkv"])
    assert GOLDEN.stat().st_size < 20_000


# ============================================================================================== full 0.5B shapes
def test_full_qwen2_5_0_5b_shapes_32_greedy_steps(tmp_path: Path) -> None:
    """The draft's real shapes (24 layers, 896 wide, 14/2 heads, 4864 MLP, 151936 vocab), synthetic weights."""
    dims = {"base": "qwen2.5-0.5b"}
    prompt = _random_tokens(8, 151936, 5)
    proc_args = dict(dims=dims, seed=1, capacity=64, rows=2, prompt=prompt, steps=FULL_STEPS)
    out = tmp_path / "jax_out.npz"
    env = dict(os.environ, XLA_FLAGS=ONE_THREAD, JAX_PLATFORMS="cpu", PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, __file__, json.dumps({**proc_args, "out": str(out)})],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ref = ref_run(dims, 1, 64, prompt, FULL_STEPS, None, None)  # runs while the JAX process does
    finally:
        _stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr[-4000:]
    with np.load(out) as z:
        jax_out = {k: z[k] for k in z.files}
    assert jax_out["tokens"].tolist() == ref["tokens"]
    assert jax_out["logit_sha"].tolist() == ref["logit_sha"]
    assert len(set(ref["tokens"])) > 8


# ============================================================================================== primitives
def test_integer_primitives_match_the_reference_on_random_and_extreme_values() -> None:
    import jax
    import jax.numpy as jnp
    from test_functional_ref import bitlen, isqrt_exact, norm15, quant8, requant32, rshr, shift

    from fpga.functional import intops

    rng = np.random.default_rng(7)
    edges = np.array([0, 1, -1, 2, -2, 3, -3, 2**31 - 1, -(2**31), 2**40 + 1, -(2**40) - 1, 2**61 - 1, -(2**61)])
    x = np.concatenate([edges, rng.integers(-(2**62), 2**62, 4000), rng.integers(-1000, 1000, 4000)])
    s = rng.integers(0, 63, x.size)
    s_any = rng.integers(-40, 70, x.size)
    with jax.enable_x64(True):
        fit = np.abs(x) < 2**61
        assert np.array_equal(np.asarray(intops.rshr(jnp.asarray(x[fit]), jnp.asarray(s[fit]))), rshr(x[fit], s[fit]))
        small = np.abs(x) < 2**57
        assert np.array_equal(
            np.asarray(intops.requant32(jnp.asarray(x[small]), jnp.asarray(s_any[small]))),
            requant32(x[small], s_any[small]),
        )
        nonneg = np.abs(x[np.abs(x) < 2**62])
        assert np.array_equal(np.asarray(intops.bitlen(jnp.asarray(nonneg))), bitlen(nonneg))
        m = np.abs(rng.integers(0, 2**45, 3000))
        e = rng.integers(-80, 80, 3000)
        jm, je = intops.norm15(jnp.asarray(m), jnp.asarray(e))
        rm, re = norm15(m, e)
        assert np.array_equal(np.asarray(jm), rm) and np.array_equal(np.asarray(je), re)
        lim = np.array([2**30, 2**30 + 1, 2**32 - 1, 2**32, (2**16 - 1) ** 2, (2**16 - 1) ** 2 - 1])
        mn = np.concatenate([lim, rng.integers(2**30, 2**32 + 1, 5000)])
        assert np.asarray(intops.isqrt(jnp.asarray(mn))).tolist() == [isqrt_exact(v) for v in mn]
        sh = rng.integers(-20, 40, 2000)
        xs = rng.integers(-(2**20), 2**20, 2000)
        assert np.array_equal(
            np.asarray(intops.shift(jnp.asarray(xs), jnp.asarray(sh))),
            np.array([int(shift(np.array(a), int(b))) for a, b in zip(xs, sh)]),
        )
        for scale in (0, 1, 100, 2**20, 2**45, 2**60):
            v = rng.integers(-scale - 1, scale + 1, (16, 96))
            q, a, ee = intops.quant8(jnp.asarray(v), -12)
            for row in range(16):
                rq, ra, re2 = quant8(v[row], -12)
                assert np.array_equal(np.asarray(q[row]), rq) and int(a[row]) == ra and int(ee[row]) == re2


if __name__ == "__main__":
    _worker(json.loads(sys.argv[1]))
