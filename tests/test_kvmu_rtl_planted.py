"""Planted bugs that the KVMU verifier used to miss (issue 29), each an edit of the reference in tests/kvmu_planted.py:
a run counter one bit too narrow at three widths (2, 6, 12 bits: only runs longer than 2**w cycles expose it), a
run kept over reset and a status kept over reset (registers with a power-up value but no reset: only a reset
inside a command, or after a refusal, exposes them), and a capacity-edge overflow (a room check on 24 bits: only
capacities of 2**24 and more expose it). `hwmodel kvmu verify` with its default settings (1,000 examples, seed
0) must fail each, with a counterexample that fails from reset on a fresh simulator and that the reference RTL
passes -- or, for state that survives reset between two examples, with both examples."""

from __future__ import annotations

import difflib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from fpga.kvmu.verify.contract import RESET_OP, compare
from fpga.kvmu.verify.mutants import REFERENCE_RTL
from fpga.kvmu.verify.session import missing_tool
from hwmodel.cli import main
from tests.kvmu_planted import PLANTED, write_planted

MISSING = missing_tool("icarus")
pytestmark = pytest.mark.skipif(MISSING is not None, reason=f"no RTL simulator: {MISSING}")

#: fixture -> (signals the first difference may be on, what the counterexample must hold)
EXPECT = {
    "narrow_run_counter_2": ({"cmd_ready"}, "a run longer than 4 cycles"),
    "narrow_run_counter_6": ({"cmd_ready"}, "a run longer than 64 cycles"),
    "narrow_run_counter_12": ({"cmd_ready"}, "a run longer than 4096 cycles"),
    "run_kept_over_reset": ({"cmd_ready", "ahead_ptr", "kv_wr_en"}, "a reset"),
    "status_kept_over_reset": ({"status"}, "a reset"),
    "capacity_edge_overflow": ({"status", "cmd_ready"}, "a capacity of 2**24 or more"),
}


def _holds(name: str, example, before) -> bool:  # type: ignore[no-untyped-def]
    runs = [c.arg for c in example.commands if c.op in (1, 4, 6) and c.arg >= 1]
    if name.startswith("narrow_run_counter_"):
        return max(runs, default=0) > 2 ** int(name.rsplit("_", 1)[1])
    if name == "capacity_edge_overflow":
        return example.capacity >= 2**24
    # a reset inside the example, or the reset between the two examples of "state survives reset"
    return any(c.op == RESET_OP for c in example.commands) or before is not None


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    return write_planted(tmp_path_factory.mktemp("planted"))


@pytest.fixture(scope="module")
def reference_session():  # type: ignore[no-untyped-def]
    from fpga.kvmu.verify.session import RtlSession

    with RtlSession([REFERENCE_RTL], "kvmu") as s:
        yield s


def test_the_fixtures_are_the_reference_with_one_bug(planted: dict[str, Path]) -> None:
    ref = REFERENCE_RTL.read_text()
    assert set(PLANTED) == set(EXPECT)
    for name in EXPECT:
        src = planted[name].read_text()
        assert src.startswith(f"// PLANTED BUG ({name})") and src != ref
        body = src.split("\n", 1)[1]
        diff = [
            ln
            for ln in difflib.unified_diff(ref.splitlines(), body.splitlines(), lineterm="", n=0)
            if ln[:1] in "+-" and not ln.startswith(("+++", "---"))
        ]
        assert 1 <= len(diff) <= 3, (name, diff)


@pytest.mark.parametrize("name", list(EXPECT))
def test_planted_bug_is_caught_by_default(name: str, tmp_path: Path, planted, reference_session) -> None:  # type: ignore[no-untyped-def]
    from fpga.kvmu.verify.verify import MISMATCH, SURVIVES_RESET, verify

    result = verify([planted[name]], "kvmu", out_dir=tmp_path)
    assert not result.passed, name
    assert result.verdict in (MISMATCH, SURVIVES_RESET), result.message()
    signals, what = EXPECT[name]
    assert result.mismatch is not None and result.mismatch.signal in signals, result.message()
    assert _holds(name, result.example, result.before), f"expected {what}: {result.example.command_file()}"
    # the counterexample is the bug's, not the testbench's: the reference RTL passes it
    if result.before is not None:
        sched, observed = reference_session.run(result.before)
        assert compare(sched, observed) is None
    sched, observed = reference_session.run(result.example)
    assert compare(sched, observed) is None
    assert (tmp_path / "counterexample.txt").read_text().startswith(f"# hwmodel kvmu verify: {result.verdict}")


def test_state_surviving_reset_reports_both_examples(tmp_path: Path, planted: dict[str, Path]) -> None:
    """The status-over-reset bug, through the CLI: whichever form the failure takes, the report is a verdict
    with exit 1 and a counterexample, never a traceback; --json prints the report."""
    res = CliRunner().invoke(
        main,
        [
            "kvmu",
            "verify",
            "--rtl",
            str(planted["status_kept_over_reset"]),
            "--top",
            "kvmu",
            "--out",
            str(tmp_path),
            "--json",
        ],
    )
    assert res.exit_code == 1, res.output
    rep = json.loads(res.stdout)
    assert rep["passed"] is False and rep["verdict"] in ("mismatch", "state survives reset")
    assert rep["counterexample"].startswith("capacity ") and "status RTL=" in rep["first_difference"]
    if rep["verdict"] == "state survives reset":
        assert rep["first_example"].startswith("capacity ")
    assert rep["coverage"]["bins"] > 100
