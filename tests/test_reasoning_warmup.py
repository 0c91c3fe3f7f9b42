"""The warm-up of the cycle-level drafts' samples (hwmodel/reasoning/warmup.py): samples simulated in other processes
leave every table bit-identical to one filled on demand, and the plan covers what a replay reads."""

from __future__ import annotations

from hwmodel.reasoning import warmup
from hwmodel.reasoning.costs import TimedEngine
from hwmodel.sampled import ContextSampledEngine
from tests.token_engine import TokenEngine as _TokenEngine


def _read(te: TimedEngine) -> list[float]:
    """What a replay reads: decode spans, finish times, ingest times, prefills, at contexts up to 1,500."""
    out = []
    for ctx, n in ((0, 40), (130, 77), (990, 64), (1400, 100), (1023, 2)):
        out += [te.decode_span_s(ctx, n), te.decode_energy_j(ctx, n), *te.decode_finish_times(ctx, n)]
        out += te.ingest_times(ctx, n).tolist()
        out += list(te.prefill(n, ctx))
    return out


def test_warmed_tables_are_bit_identical_and_simulate_nothing_more() -> None:
    lazy = TimedEngine(ContextSampledEngine(_TokenEngine(), grid=16), initial_ctx=0)
    tok = _TokenEngine()
    warm = TimedEngine(ContextSampledEngine(tok, grid=16), initial_ctx=0)
    # in this process (jobs=1): no fork in the test process (JAX threads); the reproduction forks (jobs=2)
    simulated = warmup.warm([(warm, 1500)], jobs=1)
    calls = tok.calls
    assert simulated > 0
    assert _read(warm) == _read(lazy)  # == on floats: bit-identical
    assert tok.calls == calls  # the plan covered every sample the reads needed
    assert warm.cum_table == lazy.cum_table
    assert warmup.warm([(warm, 1500)], jobs=1) == 0  # nothing left to simulate


def test_engines_simulating_the_same_tokens_share_their_samples() -> None:
    tok = _TokenEngine()
    fine = TimedEngine(ContextSampledEngine(tok, grid=16), initial_ctx=0)
    coarse = TimedEngine(ContextSampledEngine(tok, grid=64), initial_ctx=0)  # its samples are a subset of fine's
    alone = warmup.warm([(TimedEngine(ContextSampledEngine(_TokenEngine(), grid=16), initial_ctx=0), 1000)], jobs=1)
    assert warmup.warm([(fine, 1000), (coarse, 1000)], jobs=1) == alone
    lazy = TimedEngine(ContextSampledEngine(_TokenEngine(), grid=64), initial_ctx=0)
    assert _read(coarse) == _read(lazy)


def test_the_context_bound_covers_a_real_replay(monkeypatch) -> None:  # noqa: ANN001
    """Warmed with the bound of its traces, a study unit on the real cycle-level draft simulates no sample itself."""
    from hwmodel.reasoning import sample_cache, study
    from hwmodel.reasoning.system import clear_engine_memo

    monkeypatch.setattr(sample_cache, "cache_root", lambda: None)  # simulated here, not read from the disk cache
    clear_engine_memo()
    try:
        unit = study.Unit("math500", "config1", "heteroreason")
        targets = study.warm_targets([unit], limit=4)
        eng = warmup.sampled(targets[0][0])
        assert eng is not None  # the draft-u280 streaming design, sampled
        assert warmup.warm(targets, jobs=1) > 0
        before = (dict(eng._decode_pts), dict(eng._ingest_pts))
        study.run_unit(unit, limit=4)
        assert (eng._decode_pts, eng._ingest_pts) == before
    finally:
        clear_engine_memo()


def test_csv_text_is_byte_identical_to_write_csv(tmp_path) -> None:  # noqa: ANN001
    """The rows' CSV is formatted once as text (problems.csv is the units' texts concatenated): the same bytes as
    write_csv of the same rows as mappings, non-finite floats, quoting and booleans included."""
    from hwmodel.report.tables import csv_lines, write_csv, write_csv_text

    fields = ["a", "b", "c", "d", "e"]
    rows = [
        [1.5, float("nan"), "x,y", True, 3],
        [float("inf"), -0.0, 'q"uote', False, -7],
        [1e-300, -float("inf"), "", None, 2**70],
        [0.1 + 0.2, 5e-324, "line\nbreak", 1, 0.0],
    ]
    write_csv(tmp_path / "a.csv", (dict(zip(fields, r)) for r in rows), fields)
    write_csv_text(tmp_path / "b.csv", fields, [csv_lines(rows[:2]), csv_lines(rows[2:])])
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


def test_the_parents_side_steps_all_run_whether_or_not_there_are_samples() -> None:
    done: list[int] = []

    def side():  # noqa: ANN202
        for i in range(5):
            done.append(i)
            yield i

    warm = TimedEngine(ContextSampledEngine(_TokenEngine(), grid=16), initial_ctx=0)
    assert warmup.warm([(warm, 1500)], jobs=1, side=side()) > 0
    assert done == list(range(5))
    done.clear()
    assert warmup.warm([(warm, 1500)], jobs=1, side=side()) == 0  # nothing left to simulate
    assert done == list(range(5))
