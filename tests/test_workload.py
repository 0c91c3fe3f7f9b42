"""Reasoning traces: schema and validator, RSD-log importer, data, and the generator's acceptance model."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hwmodel.workload.acceptance import AcceptanceModel, solve_hazard
from hwmodel.workload.datasets import DATA_DIR, DATASETS, load_prompts, load_real_answers
from hwmodel.workload.generator import base_accuracy, generate, generate_pair, plan_dataset, trace_stats
from hwmodel.workload.rsd import import_rsd
from hwmodel.workload.steps import fit_length_model
from hwmodel.workload.trace import (
    ACCEPT,
    BACKTRACK,
    DRAFT,
    REJECT,
    TARGET,
    Attempt,
    Problem,
    Trace,
    TraceError,
    TraceHeader,
    replay,
    replay_of,
)
from hwmodel.workload.traceio import parse_trace_text, read_trace, trace_lines, write_trace

TARGETS = ("qwen2.5-math-7b", "qwen2.5-math-1.5b")


# ------------------------------------------------------------------------------------------------ helpers
def build_problem(
    decisions: list[tuple[bool, bool]], lengths: list[int], backtracking: bool, max_bt: int = 5, pid: str = "p"
) -> Problem:
    """A valid problem from a list of (draft rejected?, target fails?) decisions, one per attempted step."""
    attempts: list[Attempt] = []
    committed = 0
    n_steps = len(lengths)
    it = iter(decisions)
    backtracks = 0
    while committed < n_steps:
        rej, fail = next(it, (False, False))
        k = committed
        final = k == n_steps - 1
        if not rej:
            attempts.append(Attempt(k, DRAFT, lengths[k], 0.9, ACCEPT, final))
            committed += 1
            continue
        attempts.append(Attempt(k, DRAFT, lengths[k], 0.3, REJECT, final))
        step = k
        while True:
            final_t = step == n_steps - 1
            if not backtracking:
                attempts.append(Attempt(step, TARGET, lengths[step] + 1, None, ACCEPT, final_t))
                committed += 1
                break
            if fail and committed > 0 and backtracks < max_bt:
                attempts.append(Attempt(step, TARGET, lengths[step] + 1, 0.2, BACKTRACK, final_t))
                backtracks += 1
                committed -= 1
                step -= 1
                rej, fail = next(it, (False, False))
                continue
            attempts.append(Attempt(step, TARGET, lengths[step] + 1, 0.2 if fail else 0.8, ACCEPT, final_t))
            committed += 1
            break
    return Problem("math500", pid, 50, True, tuple(attempts))


problems_st = st.tuples(
    st.lists(st.tuples(st.booleans(), st.booleans()), min_size=0, max_size=30),
    st.lists(st.integers(min_value=2, max_value=200), min_size=1, max_size=12),
    st.booleans(),
)


def small_trace(backtracking: bool = True) -> Trace:
    return generate("math500", "qwen2.5-math-7b", backtracking, limit=6)


# ------------------------------------------------------------------------------------------------ data
def test_shipped_data_matches_its_provenance() -> None:
    text = (DATA_DIR / "PROVENANCE.md").read_text()
    rows = re.findall(r"\| `([a-z0-9_]+\.jsonl)` \| (\d+) \| `([0-9a-f]{64})` \|", text)
    assert len(rows) == 5
    for name, n_rows, digest in rows:
        data = (DATA_DIR / name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest, name
        assert data.count(b"\n") == int(n_rows), name
    assert [len(load_prompts(d)) for d in DATASETS] == [500, 1319, 385, 675]
    assert len(load_real_answers()) == 800


def test_length_model_is_fitted_on_the_data() -> None:
    lm = fit_length_model()
    # harder MATH levels have longer gold solutions and longer real answers: the elasticity is positive, below 1
    assert 0.3 < lm.beta < 0.9
    assert 0.1 < lm.regen_sigma < 0.4
    expected = [lm.level_expected_tokens(level) for level in range(1, 6)]
    assert expected == sorted(expected)
    # the fit reproduces the per-level answer lengths within their scatter
    assert np.allclose(expected, lm.level_answer_tokens, rtol=0.2)


# ------------------------------------------------------------------------------------------------ generator
def test_generator_is_deterministic_and_seeded() -> None:
    a = list(trace_lines(generate("gsm8k", "qwen2.5-math-7b", True, limit=40)))
    b = list(trace_lines(generate("gsm8k", "qwen2.5-math-7b", True, limit=40)))
    c = list(trace_lines(generate("gsm8k", "qwen2.5-math-7b", True, limit=40, seed=7)))
    assert a == b
    assert a[1:] != c[1:]


@pytest.mark.parametrize("dataset", DATASETS)
def test_generated_traces_use_real_prompts_and_validate(dataset: str, tmp_path: Path) -> None:
    nobt, bt = generate_pair(dataset, "qwen2.5-math-7b")
    prompts = load_prompts(dataset)
    assert [p.prompt_tokens for p in bt.problems] == [p.prompt_tokens for p in prompts]
    path = write_trace(bt, tmp_path / "t.jsonl.gz")
    assert read_trace(path) == bt


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dataset", DATASETS)
def test_rejection_rates_below_30_percent_and_at_most_5_backtracks(dataset: str, target: str) -> None:
    for trace in generate_pair(dataset, target):
        stats = trace_stats(trace)
        assert 0.05 < stats["step_reject_rate"] < 0.30
        assert stats["max_backtracks_in_a_problem"] <= 5
    bt = generate(dataset, target, True)
    assert trace_stats(bt)["backtracks_per_problem"] > 0  # refinement failures do trigger backtracking


def test_rejection_rate_follows_dataset_difficulty() -> None:
    rates = {d: trace_stats(generate(d, "qwen2.5-math-7b", False))["step_reject_rate"] for d in DATASETS}
    assert rates["gsm8k"] < rates["math500"] < rates["gaokao2023en"]
    assert rates["gsm8k"] < rates["olympiadbench"]
    tokens = {d: trace_stats(generate(d, "qwen2.5-math-7b", False))["committed_tokens_per_problem"] for d in DATASETS}
    assert tokens["gsm8k"] < tokens["math500"] < tokens["olympiadbench"]


def test_rejections_cluster_on_long_late_and_hard_steps() -> None:
    trace = generate("math500", "qwen2.5-math-7b", False)
    levels = {p.idx: p.level for p in load_prompts("math500")}
    rows = []  # (tokens, relative position, level, rejected) of first-pass draft steps
    for p in trace.problems:
        n_steps = 1 + max(a.step for a in p.attempts)
        for a in p.attempts:
            if a.by == DRAFT:
                rows.append((a.tokens, a.step / max(1, n_steps - 1), levels[int(p.id)], a.verdict == REJECT))
    arr = np.array(rows, dtype=float)
    rej = arr[:, 3] > 0
    long = arr[:, 0] > np.median(arr[:, 0])
    late = arr[:, 1] > 0.5
    assert rej[long].mean() > 1.5 * rej[~long].mean()
    assert rej[late].mean() > rej[~late].mean()
    assert rej[arr[:, 2] == 5].mean() > rej[arr[:, 2] == 1].mean()


@pytest.mark.parametrize("target", TARGETS)
def test_pair_shares_problems_and_decisions_until_the_first_backtrack(target: str) -> None:
    nobt, bt = generate_pair("olympiadbench", target)
    diverged = 0
    for p0, p1 in zip(nobt.problems, bt.problems):
        assert (p0.id, p0.prompt_tokens) == (p1.id, p1.prompt_tokens)
        k = next((i for i, a in enumerate(p1.attempts) if a.verdict == BACKTRACK), len(p1.attempts))
        diverged += k < len(p1.attempts)
        for a0, a1 in zip(p0.attempts[:k], p1.attempts[:k]):
            assert (a0.step, a0.by, a0.tokens, a0.final) == (a1.step, a1.by, a1.tokens, a1.final)
            if a0.by == DRAFT:
                assert (a0.score, a0.verdict) == (a1.score, a1.verdict)
            else:
                assert a0.score is None and a1.score is not None
        if k < len(p1.attempts):  # the refinement that fails with backtracking is kept without it
            assert p0.attempts[k].tokens == p1.attempts[k].tokens and p0.attempts[k].verdict == ACCEPT
    assert diverged > 0


@pytest.mark.parametrize("dataset", DATASETS)
def test_backtracking_accuracy_effect_comes_from_the_traces(dataset: str) -> None:
    nobt, bt = generate_pair(dataset, "qwen2.5-math-7b")
    acc0, acc1 = trace_stats(nobt)["accuracy"], trace_stats(bt)["accuracy"]
    assert acc1 > acc0
    # without backtracking the trace is as accurate as the target alone, in expectation (RSD's finding)
    goal = AcceptanceModel().accuracy(dataset, "qwen2.5-math-7b")
    sigma = (goal * (1 - goal) / len(nobt.problems)) ** 0.5
    assert abs(acc0 - goal) < 4 * sigma + 1e-9
    # flawed steps only ever lower the chance of a right answer, so a0 is at least the target's accuracy
    assert base_accuracy(dataset, "qwen2.5-math-7b") >= goal


def test_solve_hazard_hits_the_rate() -> None:
    w = np.linspace(1, 2, 50)
    n = np.arange(2, 102, 2)
    h = solve_hazard(w, n, 0.2)
    assert np.mean(1 - np.exp(-h * w * n)) == pytest.approx(0.2, rel=1e-9)


def test_truncated_answers_stop_at_the_context_cap() -> None:
    for plan in plan_dataset("olympiadbench"):
        assert plan.prompt_tokens + sum(plan.steps) <= 4096


# ------------------------------------------------------------------------------------------------ replay rules
@given(problems_st)
def test_replay_commits_one_accepted_attempt_per_step(args: tuple) -> None:
    decisions, lengths, backtracking = args
    p = build_problem(decisions, lengths, backtracking)
    r = replay(p, backtracking)
    steps = [p.attempts[i].step for i in r.committed]
    assert steps == list(range(len(lengths)))
    assert all(p.attempts[i].verdict == ACCEPT for i in r.committed)
    assert r.backtracks <= 5
    assert r.committed_tokens(p) == sum(p.attempts[i].tokens for i in r.committed)
    assert r.context_tokens[-1] == p.prompt_tokens + r.committed_tokens(p) - p.attempts[-1].tokens
    # every backtrack is followed by the target's alternative for the previous step
    for i, a in enumerate(p.attempts):
        if a.verdict == BACKTRACK:
            nxt = p.attempts[i + 1]
            assert nxt.by == TARGET and nxt.step == a.step - 1
    # text round trip
    header = TraceHeader(backtracking=backtracking)
    text = "\n".join(trace_lines(Trace(header, (p,))))
    assert parse_trace_text(text).problems == (p,)


@given(problems_st, st.data())
def test_any_single_field_corruption_is_refused_with_its_line(args: tuple, data: st.DataObject) -> None:
    decisions, lengths, backtracking = args
    p = build_problem(decisions, lengths, backtracking)
    header = TraceHeader(backtracking=backtracking)
    lines = list(
        trace_lines(Trace(header, (p, Problem("math500", "q", 20, False, (Attempt(0, DRAFT, 3, 0.9, ACCEPT, True),)))))
    )
    obj = json.loads(lines[1])
    i = data.draw(st.integers(0, len(obj["attempts"]) - 1))
    field, bad = data.draw(
        st.sampled_from(
            [
                ("tokens", 0),
                ("tokens", "12"),
                ("by", "oracle"),
                ("verdict", "maybe"),
                ("step", -1),
                ("score", 1.5),
                ("final", "yes"),
                ("extra", 1),
            ]
        )
    )
    obj["attempts"][i][field] = bad
    lines[1] = json.dumps(obj)
    with pytest.raises(TraceError) as exc:
        parse_trace_text("\n".join(lines), "t.jsonl")
    assert str(exc.value).startswith(f"t.jsonl:2: field 'attempts[{i}].{field}'")


# ------------------------------------------------------------------------------------------------ validator
def _valid_lines() -> list[str]:
    return list(trace_lines(small_trace(True)))


def _mutate(lines: list[str], line_no: int, fn) -> str:  # noqa: ANN001
    obj = json.loads(lines[line_no - 1])
    fn(obj)
    out = list(lines)
    out[line_no - 1] = json.dumps(obj)
    return "\n".join(out)


@pytest.mark.parametrize(
    "mutation, field, why",
    [
        (lambda o: o.pop("prompt_tokens"), "prompt_tokens", "required"),
        (lambda o: o.update(prompt_tokens=0), "prompt_tokens", "integer >= 1"),
        (lambda o: o.update(correct="yes"), "correct", "true or false"),
        (lambda o: o.update(attempts=[]), "attempts", "non-empty"),
        (lambda o: o.update(colour=1), "colour", "known field"),
        (lambda o: o["attempts"][0].update(step=3), "attempts[0].step", "number of steps committed"),
        (lambda o: o["attempts"][0].update(by="target"), "attempts[0].by", "'draft'"),
        (lambda o: o["attempts"][0].update(score=0.1), "attempts[0].verdict", "'reject'"),
        (lambda o: o["attempts"][0].update(verdict="backtrack"), "attempts[0].verdict", "'accept' or 'reject'"),
        (lambda o: o["attempts"][0].update(score=None), "attempts[0].score", "every draft step is scored"),
        (lambda o: o["attempts"][-1].update(final=False), "final", "must end the answer"),
        (lambda o: o["attempts"].append(dict(o["attempts"][-1])), "final", "more attempt"),
    ],
)
def test_malformed_problem_line_is_refused_with_line_and_field(mutation, field: str, why: str) -> None:  # noqa: ANN001
    lines = _valid_lines()
    text = _mutate(lines, 4, mutation)
    with pytest.raises(TraceError) as exc:
        parse_trace_text(text, "trace.jsonl")
    msg = str(exc.value)
    assert msg.startswith("trace.jsonl:4: field '") and field in msg and why in msg, msg
    assert "\n" not in msg


def test_header_and_json_errors() -> None:
    lines = _valid_lines()
    with pytest.raises(TraceError, match=r"t:1: field 'version'"):
        parse_trace_text(_mutate(lines, 1, lambda o: o.update(version=9)), "t")
    with pytest.raises(TraceError, match=r"t:1: field 'format'"):
        parse_trace_text("\n".join(lines[1:]), "t")
    with pytest.raises(TraceError, match=r"t:3: expected one JSON object per line"):
        parse_trace_text("\n".join(lines[:2] + ["{oops"] + lines[3:]), "t")
    with pytest.raises(TraceError, match=r"t:3: field 'id'.*unique"):
        parse_trace_text("\n".join(lines[:2] + [lines[1]]), "t")
    with pytest.raises(TraceError, match="empty"):
        parse_trace_text("", "t")


def test_backtrack_rules() -> None:
    ok = (
        Attempt(0, DRAFT, 5, 0.9, ACCEPT),
        Attempt(1, DRAFT, 5, 0.1, REJECT),
        Attempt(1, TARGET, 6, 0.2, BACKTRACK),
        Attempt(0, TARGET, 7, 0.9, ACCEPT),
        Attempt(1, DRAFT, 5, 0.9, ACCEPT, True),
    )
    r = replay(Problem("d", "1", 10, True, ok), True)
    assert r.committed == (3, 4) and r.backtracks == 1 and r.context[4] == (3,)
    assert r.first_target_at_context == (False, False, True, True, False)
    # without backtracking the target step is committed unscored; a backtrack verdict is refused
    with pytest.raises(Exception, match="without backtracking"):
        replay(Problem("d", "1", 10, True, ok), False)
    # a failing refinement must backtrack while the budget allows
    bad = ok[:2] + (Attempt(1, TARGET, 6, 0.2, ACCEPT, True),)
    with pytest.raises(Exception, match="'backtrack'"):
        replay(Problem("d", "1", 10, True, bad), True)
    assert replay(Problem("d", "1", 10, True, bad), True, max_backtracks=0).forced_accepts == 1


# ------------------------------------------------------------------------------------------------ RSD importer
def _rsd_rows() -> list[dict]:
    return [
        {
            "idx": 0,
            "token_counts": [100, 47, 61],
            "turn_info": [[0, 1], [1, 2], [2, 1], [3, 2]],
            "reward": [0.91, 0.42, 0.77, 0.1],
            "score": [True],
        },
        {"idx": 3, "token_counts": [30, 0, 0], "turn_info": [[0, 1]], "reward": [0.8], "score": [False]},
    ]


def test_rsd_import_keeps_totals_and_structure(tmp_path: Path) -> None:
    path = tmp_path / "rsd.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in _rsd_rows()) + "\n")
    trace = import_rsd(path, "math500")
    assert not trace.header.backtracking and trace.header.source == "rsd-log"
    p = trace.problems[0]
    assert p.prompt_tokens == load_prompts("math500")[0].prompt_tokens and p.correct
    draft_acc = sum(a.tokens for a in p.attempts if a.by == DRAFT and a.verdict == ACCEPT)
    draft_rej = sum(a.tokens for a in p.attempts if a.by == DRAFT and a.verdict == REJECT)
    target = sum(a.tokens for a in p.attempts if a.by == TARGET)
    assert (draft_acc, target, draft_rej) == (100, 47, 61)
    assert [a.by for a in p.attempts] == [DRAFT, DRAFT, TARGET, DRAFT, DRAFT, TARGET]
    assert replay_of(p, trace.header).committed == (0, 2, 3, 5)
    assert trace.problems[1].id == "3" and not trace.problems[1].correct


@pytest.mark.parametrize(
    "row, field",
    [
        ({"token_counts": [1, 2]}, "token_counts"),
        ({"reward": [0.9]}, "reward"),
        ({"turn_info": [[0, 1], [1, 1], [2, 1], [3, 2]]}, "turn_info[1]"),
        ({"turn_info": [[0, 1], [5, 2], [2, 1], [3, 2]]}, "turn_info[1]"),
        ({"idx": 99999}, "idx"),
        ({"token_counts": [100, 1, 61]}, "token_counts"),
    ],
)
def test_rsd_import_errors_name_line_and_field(row: dict, field: str, tmp_path: Path) -> None:
    rows = _rsd_rows()
    rows[0] = {**rows[0], **row}
    path = tmp_path / "rsd.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [rows[1], rows[0]]) + "\n")
    with pytest.raises(TraceError) as exc:
        import_rsd(path, "math500")
    assert str(exc.value).startswith(f"{path}:2: field '{field}'"), str(exc.value)
