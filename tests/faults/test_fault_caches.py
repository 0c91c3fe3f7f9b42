"""Damaged caches read as absent (issue #31): a truncated, scrambled, foreign-format or other-version engine-table
file and a damaged Numba index or data file give one stderr line and a rebuild, never an exception or a number
read from the damage."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from hwmodel.serving import devices
from hwmodel.serving.devices import TABLE_FORMAT, _read_table_file


def _good_table(path: Path, key: str) -> None:
    np.savez(
        path,
        format=np.array(TABLE_FORMAT),
        key=np.array(key),
        val=np.array([0.0, 1e-3, 2e-3]),
        have=np.array([True, True, False]),
        prefill_n=np.array([16], dtype=np.int64),
        prefill_s=np.array([0.01]),
        power_w=np.array([10.0] * len(devices.Phase)),
    )


def _damage(kind: str, good: bytes) -> bytes:
    if kind == "truncated":
        return good[: len(good) // 2]
    if kind == "empty":
        return b""
    if kind == "scrambled":  # flip bytes in the middle (inside an array's data: the zip CRC-32 catches it)
        b = bytearray(good)
        for i in range(len(b) // 3, len(b) // 3 + 24):
            b[i] ^= 0x5A
        return bytes(b)
    if kind == "not-an-archive":
        return b"hello, this is not a zip file\n" * 10
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["truncated", "empty", "scrambled", "not-an-archive"])
def test_damaged_engine_table_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "decode-x-0123456789abcdef0123.npz"
    _good_table(path, "0123456789abcdef0123")
    assert _read_table_file(path, "0123456789abcdef0123")[2] == {16: 0.01}  # the good file reads back
    path.write_bytes(_damage(kind, path.read_bytes()))
    with pytest.raises(Exception):  # noqa: B017  (any error: _load treats every one as "absent")
        _read_table_file(path, "0123456789abcdef0123")


def test_other_version_and_other_key_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.npz"
    _good_table(path, "k1")
    with pytest.raises(ValueError, match="another key"):
        _read_table_file(path, "k2")
    np.savez(
        path,
        val=np.zeros(3),
        have=np.zeros(3, dtype=bool),
        prefill_n=np.zeros(0, dtype=np.int64),
        prefill_s=np.zeros(0),
    )  # the format before TABLE_FORMAT 2: no version field
    with pytest.raises(ValueError, match="format none"):
        _read_table_file(path, "k1")
    np.savez(
        path,
        format=np.array(TABLE_FORMAT),
        key=np.array("k1"),
        val=np.array([-1.0]),
        have=np.array([True]),
        prefill_n=np.zeros(0, dtype=np.int64),
        prefill_s=np.zeros(0),
    )
    with pytest.raises(ValueError, match="negative"):
        _read_table_file(path, "k1")


def test_engine_factory_rebuilds_a_damaged_table_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hwmodel.serving.cluster import load_cluster, resolve_cluster
    from hwmodel.specs import library

    cluster = resolve_cluster(load_cluster("a100+7xu280"))
    group = next(g for _i, role, _j, g in cluster.spec.groups() if role == "prefill")  # the GPU: no kernel compile
    fac = devices.EngineFactory(cache=tmp_path)
    model = fac.build(group, cluster.llm, library(), "test", "group")
    model.table.step_s(0)
    fac.save()
    (path,) = tmp_path.glob("decode-*.npz")
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 3])
    fac2 = devices.EngineFactory(cache=tmp_path)
    model2 = fac2.build(group, cluster.llm, library(), "test", "group")
    err = capsys.readouterr().err
    assert err.count("damaged engine-table cache") == 1 and str(path) in err
    assert model2.saved_contexts == 0  # nothing taken from the damaged file
    assert model2.table.step_s(0) == model.table.step_s(0)
    fac2.save()
    fac3 = devices.EngineFactory(cache=tmp_path)
    model3 = fac3.build(group, cluster.llm, library(), "test", "group")
    assert model3.saved_contexts > 0 and capsys.readouterr().err == ""  # rebuilt and read back


def test_damaged_numba_cache_entry_is_a_miss(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from numba.core import caching

    import hwmodel.serving.transfer  # noqa: F401  (imports numba with the project locator installed)
    from hwmodel import numba_cache

    root = numba_cache.kernel_dir()
    assert root is not None and caching._hwmodel_locator is not None
    cdir = root / "faults-test"
    cdir.mkdir(parents=True, exist_ok=True)
    files = caching.IndexDataCacheFile(cache_path=str(cdir), filename_base="k-1.py311", source_stamp="stamp")
    monkeypatch.setattr(numba_cache, "_roots", (*numba_cache._roots, str(root)))
    Path(files._index_path).write_bytes(pickle.dumps(caching.numba.__version__) + b"\x80\x05garbage")
    assert files._load_index() == {}
    (cdir / "k-1.py311.1.nbc").write_bytes(b"\x80\x05truncated")
    with pytest.raises(FileNotFoundError):  # what IndexDataCacheFile.load turns into a cache miss
        files._load_data("k-1.py311.1.nbc")
    err = capsys.readouterr().err
    assert err.count("damaged Numba kernel cache entry") == 2, err
    # outside the project's cache directory numba keeps its own behaviour
    other = caching.IndexDataCacheFile(cache_path=str(tmp_path), filename_base="k-1.py311", source_stamp="s")
    Path(other._index_path).write_bytes(pickle.dumps(caching.numba.__version__) + b"\x80\x05garbage")
    with pytest.raises(Exception):  # noqa: B017
        other._load_index()


def test_kernels_of_a_package_reached_through_a_link_use_the_project_cache(tmp_path: Path) -> None:
    """A scratch directory that links ``fpga`` to the checkout (the README tests' set-up) imports the kernels from
    the link's path: they must still be the project's (one cache, the warm-up's entries), not Numba's own
    ``__pycache__`` next to the source, which a fresh checkout does not have and which goes stale."""
    from numba.core import caching

    import fpga.hbm.channel as channel
    from hwmodel import numba_cache

    (tmp_path / "fpga").symlink_to(Path(channel.__file__).resolve().parents[1])
    linked = str(tmp_path / "fpga" / "hbm" / "channel.py")
    assert numba_cache.in_project(linked) and not numba_cache.in_project(str(tmp_path / "other.py"))
    kernel = channel.channel_request_at.py_func
    direct = caching._hwmodel_locator.from_function(kernel, channel.__file__)
    via_link = caching._hwmodel_locator.from_function(kernel, linked)
    assert via_link is not None and via_link.get_cache_path() == direct.get_cache_path()
    assert via_link.get_cache_path().startswith(str(numba_cache.kernel_dir()))
