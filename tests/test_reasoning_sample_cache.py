"""The draft samples' disk cache (hwmodel/reasoning/sample_cache.py): a later warm-up reads the samples back
bit-identical and simulates nothing; another design reads none; a damaged file is treated as absent."""

from __future__ import annotations

import dataclasses

from hwmodel.engine import Phase
from hwmodel.reasoning import sample_cache, warmup
from hwmodel.reasoning.costs import TimedEngine
from hwmodel.sampled import ContextSampledEngine
from tests.token_engine import TokenEngine


@dataclasses.dataclass(frozen=True)
class _Design:
    name: str
    clock_hz: float


@dataclasses.dataclass
class _DesignedEngine(TokenEngine):
    design: _Design = _Design("d", 2e8)


def _timed(design: _Design = _Design("d", 2e8)) -> tuple[TimedEngine, _DesignedEngine]:
    tok = _DesignedEngine(design=design)
    return TimedEngine(ContextSampledEngine(tok, grid=16), initial_ctx=0), tok


def _tables(te: TimedEngine) -> list[float]:
    return [*te.cum_table, *te.ingest_times(0, 1500).tolist()]


def test_cached_samples_read_back_bit_identical(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(sample_cache, "cache_root", lambda: tmp_path)
    first, _ = _timed()
    simulated = warmup.warm([(first, 1500)], jobs=1)
    assert simulated > 0
    path = sample_cache.cache_path(first.engine)
    assert path is not None and path.is_file()
    again, tok = _timed()
    calls = tok.calls  # the constructor's contract check
    assert warmup.warm([(again, 1500)], jobs=1) == 0  # every sample came from the file
    _tables(again)
    assert tok.calls == calls
    lazy, _ = _timed()  # not warmed: its samples are simulated on demand
    assert _tables(again) == _tables(lazy)  # == on floats: bit-identical
    other, _ = _timed(_Design("d", 3e8))  # another clock: another file, nothing read
    assert sample_cache.cache_path(other.engine) != path
    assert warmup.warm([(other, 1500)], jobs=1) == simulated


def test_a_damaged_file_is_treated_as_absent(tmp_path, monkeypatch, capsys) -> None:  # noqa: ANN001
    monkeypatch.setattr(sample_cache, "cache_root", lambda: tmp_path)
    te, _ = _timed(_Design("damaged", 2e8))
    path = sample_cache.cache_path(te.engine)
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_text('{"format": 1, "decode": {"0": -1.0}, "ingest": {}}')
    simulated = warmup.warm([(te, 1500)], jobs=1)
    assert simulated > 0
    assert "damaged draft-sample cache" in capsys.readouterr().err
    again, _ = _timed(_Design("damaged", 2e8))
    assert warmup.warm([(again, 1500)], jobs=1) == 0  # rewritten whole after the run


def test_the_sample_directory_can_be_moved_and_caching_turned_off(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    te, _ = _timed()
    monkeypatch.setenv("HWMODEL_SAMPLE_CACHE_DIR", str(tmp_path / "elsewhere"))
    path = sample_cache.cache_path(te.engine)
    assert path is not None and path.parent == tmp_path / "elsewhere"
    assert (
        sample_cache.cache_path(TimedEngine(ContextSampledEngine(TokenEngine(), grid=16)).engine) is None
    )  # no design
    monkeypatch.setattr(sample_cache, "cache_root", lambda: None)  # HWMODEL_CACHE_DIR=off
    assert sample_cache.cache_path(te.engine) is None


def test_phase_powers_are_cached_beside_the_samples(tmp_path, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(sample_cache, "cache_root", lambda: tmp_path)
    first, tok = _timed(_Design("powered", 2e8))
    warmup.warm([(first, 1500)], jobs=1)
    asked: list[Phase] = []
    monkeypatch.setattr(type(tok), "power_w", lambda self, phase: asked.append(phase) or 45.0 + len(phase.value))
    want = warmup.phase_powers(first)
    assert asked == list(Phase)  # computed once each, then written to the cache file
    again, _ = _timed(_Design("powered", 2e8))
    assert warmup.warm([(again, 1500)], jobs=1) == 0
    assert warmup.phase_powers(again) == want  # read back bit-identical
    assert asked == list(Phase)  # nothing asked of the engine again
    path = sample_cache.cache_path(again.engine)
    assert path is not None
    path.write_text(path.read_text().replace('"idle": 49.0', '"idle": -1.0'))
    assert sample_cache.load_powers(path) == {}  # a damaged power table is treated as absent
