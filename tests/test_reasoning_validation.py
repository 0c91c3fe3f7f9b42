"""System A's validation rows keep the shared format and label their roles (a small replay: the full table is
`hwmodel validate`'s)."""

from __future__ import annotations

import math

from hwmodel.reasoning.validation import rows

KEYS = {
    "area",
    "name",
    "quantity",
    "series",
    "setting",
    "model",
    "published",
    "band",
    "unit",
    "role",
    "families",
    "workload",
    "source",
    "note",
}


def test_rows_have_the_shared_format_and_honest_roles() -> None:
    out = rows(datasets=("gsm8k",), limit=4)
    assert out and all(set(r) == KEYS for r in out)
    assert all(r["role"] in ("fitted", "predicted", "leave-one-out") and math.isfinite(r["model"]) for r in out)
    by = {r["name"]: r for r in out}
    assert by["T2 speedup over the 3-GPU baseline (gsm8k)"]["band"] == [1.25, 1.33]
    assert by["step rejection rate of the trace (gsm8k)"]["role"] == "fitted"  # the rates are set, not predicted
    assert by["accuracy gain of backtracking, mean of 1 datasets (config2)"]["published"] == 5.0
    assert all(r["band"] is None or r["band"][0] <= r["band"][1] for r in out)


def test_issue17_rows_say_fitted_or_predicted() -> None:
    out = rows(datasets=("gsm8k",), limit=4)
    by = {r["name"]: r for r in out}
    assert by["accuracy gain of backtracking, mean of 1 datasets (config1)"]["role"] == "fitted"
    assert by["accuracy gain of backtracking, mean of 1 datasets (config1)"]["families"] == ["backtrack"]
    opt = by["accuracy gain of backtracking with the system optimizations, mean of 1 datasets (config1)"]
    assert opt["role"] == "fitted" and opt["published"] == 1.7  # its value is the fitted gain (issue 27)
    t2 = by["T2 speedup over the 3-GPU baseline (gsm8k)"]
    assert t2["series"] == "gsm8k" and t2["quantity"] == "T2 speedup over the 3-GPU baseline"
    assert t2["setting"].startswith("quick") and "gpu" in t2["families"]
    for clock in ("200 MHz", "300 MHz projection"):
        assert by[f"latency, T2 / T1+T2, published-like draft at {clock} (gsm8k)"]["role"] == "predicted"
    assert by["T2 speedup over the 3-GPU baseline, GPUs with CUDA graphs (gsm8k)"]["band"] == [1.25, 1.33]
    assert 0.0 <= by["invalidated step-ahead energy share, 3-GPU T2 (gsm8k)"]["model"] < 1.0
