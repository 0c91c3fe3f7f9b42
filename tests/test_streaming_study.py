"""`hwmodel reproduce streaming` as points of the one runner (hwmodel.studies.streaming): the runner's results are
the direct computation's, columns in their order."""

from __future__ import annotations

from fpga.streaming.design import design_names, load_design
from fpga.streaming.engine import StreamingEngine
from hwmodel.studies import streaming
from hwmodel.studies.runner import run_points


def test_points_cover_every_design_within_its_context_limit() -> None:
    pts = streaming.points()
    keys = [k for k, _ in pts]
    assert len(set(keys)) == len(keys)
    designs = {s["design"] for _, s in pts if s["kind"] == "design"}
    assert designs == set(design_names())
    assert all(s["ctx"] <= load_design(s["design"]).max_ctx for _, s in pts if s["kind"] == "design")
    assert [s["clock_mhz"] for _, s in pts if s["kind"] == "clock"] == list(streaming.CLOCKS_MHZ)


def test_runner_results_are_the_direct_ones_in_column_order() -> None:
    pts = [p for p in streaming.points() if p[0] == "draft-u280@512"]
    res = run_points(streaming.POINT_FN, pts, workers=1)
    row = streaming._ordered(res.results["draft-u280@512"])
    direct = streaming.token_row(StreamingEngine("draft-u280").token(512))
    assert list(row) == list(streaming.TOKEN_FIELDS)
    assert row == direct
