"""Request streams: generators, length laws, file round trips, and the validator's one-line errors."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hwmodel.workload.requests import (
    Fixed,
    LogNormal,
    Request,
    RequestStreamError,
    Uniform,
    load_requests,
    parse_length,
    poisson_stream,
    summary,
    validate,
    write_requests,
)


def test_parse_length_forms() -> None:
    assert parse_length("1536") == Fixed(1536)
    assert parse_length("fixed:512") == Fixed(512)
    assert parse_length("uniform:128:2048") == Uniform(128, 2048)
    assert parse_length("lognormal:1024:0.5:4096") == LogNormal(1024.0, 0.5, 4096)
    for law in (Fixed(3), Uniform(1, 9), LogNormal(100.0, 0.7, 800)):
        assert parse_length(law.spec) == law


@pytest.mark.parametrize(
    "text, msg",
    [
        ("abc", "field 'N': expected a positive integer, got 'abc'"),
        ("fixed:0", "expected a positive integer, got 0"),
        ("uniform:10:5", "field 'HI': expected at least LO (10), got 5"),
        ("lognormal:100:-1:50", "field 'SIGMA': expected a positive number"),
        ("gamma:1:2", "expected one of N, fixed:N"),
    ],
)
def test_parse_length_errors(text: str, msg: str) -> None:
    with pytest.raises(RequestStreamError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        parse_length(text)


def test_poisson_stream_rate_and_determinism() -> None:
    a = poisson_stream(4000, 2.0, Fixed(1536), Uniform(1, 512), seed=7)
    b = poisson_stream(4000, 2.0, Fixed(1536), Uniform(1, 512), seed=7)
    assert a == b
    assert a != poisson_stream(4000, 2.0, Fixed(1536), Uniform(1, 512), seed=8)
    gaps = np.diff([r.arrival_s for r in a])
    assert gaps.mean() == pytest.approx(0.5, rel=0.05)  # mean gap 1 / rate
    assert gaps.std() == pytest.approx(0.5, rel=0.08)  # exponential: std == mean
    assert a[0].arrival_s == 0.0 and all(r.prompt_tokens == 1536 for r in a)
    outs = [r.output_tokens for r in a]
    assert min(outs) >= 1 and max(outs) <= 512
    assert summary(a)["offered_rate_per_s"] == pytest.approx(2.0, rel=0.05)


def test_saturation_stream_all_at_start() -> None:
    s = poisson_stream(10, math.inf, Fixed(8), Fixed(4), seed=0, start_s=3.0)
    assert {r.arrival_s for r in s} == {3.0}


def test_lognormal_is_clipped() -> None:
    s = poisson_stream(3000, 1.0, LogNormal(1000.0, 1.5, 4000), Fixed(1), seed=1)
    p = np.array([r.prompt_tokens for r in s])
    assert p.min() >= 1 and p.max() == 4000 and 800 < np.median(p) < 1200


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"n": 0}, "field 'n'"),
        ({"rate_per_s": 0.0}, "field 'rate_per_s'"),
        ({"rate_per_s": math.nan}, "field 'rate_per_s'"),
    ],
)
def test_generator_argument_errors(kw: dict, msg: str) -> None:
    args = {"n": 3, "rate_per_s": 1.0, "prompt": Fixed(1), "output": Fixed(1), "seed": 0} | kw
    with pytest.raises(RequestStreamError, match=msg):
        poisson_stream(**args)


@settings(max_examples=40)
@given(
    rows=st.lists(
        st.tuples(st.floats(0, 1e4, allow_nan=False), st.integers(1, 10**5), st.integers(1, 10**5)),
        min_size=1,
        max_size=30,
    ),
    ext=st.sampled_from([".csv", ".jsonl"]),
)
def test_file_round_trip(
    rows: list[tuple[float, int, int]], ext: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    rows = sorted(rows)
    reqs = tuple(Request(i * 3 + 1, t, p, o) for i, (t, p, o) in enumerate(rows))
    path = tmp_path_factory.mktemp("rt") / f"s{ext}"
    write_requests(path, reqs)
    assert load_requests(path) == reqs


def test_csv_without_id_numbers_rows(tmp_path: Path) -> None:
    p = tmp_path / "r.csv"
    p.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.5, 20 ,6\n")
    assert load_requests(p) == (Request(0, 0.0, 10, 5), Request(1, 0.5, 20, 6))


@pytest.mark.parametrize(
    "name, text, msg",
    [
        ("a.csv", "arrival,prompt_tokens,output_tokens\n0,1,1\n", "a.csv:1: expected a header row naming the columns"),
        ("a.csv", "arrival_s,prompt_tokens,output_tokens,foo\n0,1,1,2\n", "a.csv:1: field 'foo'"),
        (
            "a.csv",
            "arrival_s,prompt_tokens,output_tokens\n0,1,1\n1,x,1\n",
            "a.csv:3: field 'prompt_tokens': expected a positive integer, got 'x'",
        ),
        ("a.csv", "arrival_s,prompt_tokens,output_tokens\n0,1,1\n1,2,0\n", "a.csv:3: field 'output_tokens'"),
        ("a.csv", "arrival_s,prompt_tokens,output_tokens\n0,1,1,9\n", "a.csv:2: expected 3 comma-separated values"),
        ("a.csv", "arrival_s,prompt_tokens,output_tokens\n-1,1,1\n", "a.csv:2: field 'arrival_s'"),
        ("a.csv", "arrival_s,prompt_tokens,output_tokens\ninf,1,1\n", "a.csv:2: field 'arrival_s'"),
        (
            "a.csv",
            "arrival_s,prompt_tokens,output_tokens\n2,1,1\n1,1,1\n",
            "a.csv: line 3 \\(id 1\\): field 'arrival_s': expected arrivals in non-decreasing order",
        ),
        (
            "a.csv",
            "id,arrival_s,prompt_tokens,output_tokens\n4,0,1,1\n4,1,1,1\n",
            "line 3 \\(id 4\\): field 'id': expected an id not already used",
        ),
        ("a.csv", "arrival_s,prompt_tokens,output_tokens\n", "a.csv: expected at least one request"),
        (
            "a.jsonl",
            '{"arrival_s": 0, "prompt_tokens": 1, "output_tokens": 1}\n[1]\n',
            "a.jsonl:2: expected a JSON object",
        ),
        ("a.jsonl", '{"arrival_s": 0, "prompt_tokens": 1.5, "output_tokens": 1}\n', "a.jsonl:1: field 'prompt_tokens'"),
        ("a.jsonl", '{"arrival_s": 0, "prompt_tokens": 1, "outputs": 1}\n', "a.jsonl:1: field 'outputs'"),
        (
            "a.jsonl",
            '{"arrival_s": 0, "prompt_tokens": true, "output_tokens": 1}\n',
            "a.jsonl:1: field 'prompt_tokens'",
        ),
        ("a.jsonl", '{"arrival_s": 0,\n', "a.jsonl:1: expected one JSON object per line"),
        ("a.txt", "x", "a.txt: expected a .csv or .jsonl file"),
    ],
)
def test_file_errors_name_file_line_field(tmp_path: Path, name: str, text: str, msg: str) -> None:
    p = tmp_path / name
    p.write_text(text)
    with pytest.raises(RequestStreamError, match=msg) as exc:
        load_requests(p)
    assert "\n" not in str(exc.value)


def test_missing_file_and_context_limit(tmp_path: Path) -> None:
    with pytest.raises(RequestStreamError, match="expected an existing request file"):
        load_requests(tmp_path / "nope.csv")
    p = write_requests(tmp_path / "r.csv", [Request(0, 0.0, 4000, 100)])
    with pytest.raises(RequestStreamError, match="prompt \\+ output <= 4096"):
        load_requests(p, max_context_tokens=4096)


def test_validate_in_memory() -> None:
    assert validate([Request(0, 0.0, 1, 1)]) == (Request(0, 0.0, 1, 1),)
    with pytest.raises(RequestStreamError, match="request 1 \\(id 0\\): field 'id'"):
        validate([Request(0, 0.0, 1, 1), Request(0, 1.0, 1, 1)])
