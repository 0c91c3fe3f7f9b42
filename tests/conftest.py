"""Shared test configuration (docs/testing.md).

- A deterministic hypothesis profile (CI must be reproducible run to run).
- The ``slow`` marker: every test of the modules in :data:`SLOW_MODULES` (and the README examples) gets it, so
  ``python3 tasks.py test --quick`` (``pytest -m "not slow"``) is the inner loop; the full suite runs them all.
- Tests that share a module- or session-scoped fixture get one ``xdist_group`` (``--dist loadgroup``,
  pyproject.toml): pytest-xdist then runs them on one worker, so the fixture (a validation table, a model run, a
  re-fit) is built once, not once per worker that happens to receive one of its tests.
- ``sigint_deliverable``: Ctrl-C reaches the test process and the subprocesses it starts, even when the suite was
  started as a background job of a non-interactive shell (which starts it with SIGINT ignored).
- Every test leaves the process's spec directories (``--spec-dir``, ``set_extra_spec_dirs``) as it found them, or
  fails: a leak otherwise fails whichever later test the xdist scheduler happens to give that worker.
- ``HWMODEL_TEST_TIMES=path``: append one JSON line per test with its wall time and its CPU time (this process
  and its finished subprocesses), so where the suite spends its time can be measured on a loaded machine.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def use_jax_compilation_cache() -> None:
    """XLA's persistent compilation cache for every process of the run (the xdist workers and the subprocesses
    the tests start inherit the variables): ``<cache root>/jax`` (:func:`hwmodel.numba_cache.cache_root`; none
    with ``HWMODEL_CACHE_DIR=off``, and a ``JAX_COMPILATION_CACHE_DIR`` already set wins). JAX keys each entry by
    the computation, its compile options and the jax/jaxlib version and backend, so an entry is reused only for
    the same program: the functional model's shapes compiled by one worker, a JAX worker process or a CLI run are
    loaded by the others instead of compiled again, and by later runs (tests/test_functional_kvmu.py: 29.5 CPU-s
    with a cold cache, 9.8 with a warm one). Every compile is kept (the default keeps only those over 1 s)."""
    from hwmodel.numba_cache import cache_root

    root = cache_root()
    if root is None or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(root / "jax")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES", "0")


use_jax_compilation_cache()  # before any test module imports jax (jax reads the variables at import)


@pytest.fixture(autouse=True)
def spec_dirs_unchanged(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test that leaves extra spec directories set (and restore them, so later tests are unaffected)."""
    from hwmodel.specs import extra_spec_dirs, set_extra_spec_dirs

    before = extra_spec_dirs()
    yield
    after = extra_spec_dirs()
    if after != before:
        set_extra_spec_dirs(before)
        pytest.fail(f"{request.node.nodeid} left the spec directories set to {[str(d) for d in after]}")


@pytest.fixture
def sigint_deliverable() -> Iterator[None]:
    """SIGINT raises ``KeyboardInterrupt`` in this process for the test's duration, and the processes it starts
    begin with SIGINT's default action (a caught signal is reset to it on exec), as under a terminal.

    A shell without job control starts an asynchronous command (``cmd &``, ``(cmd &)``, a CI step run in the
    background) with SIGINT ignored, and every descendant inherits that: Python then installs no
    ``KeyboardInterrupt`` handler, the runner rightly leaves a caller's choice alone and waits unsliced
    (:func:`hwmodel.studies.interrupt.deferred_sigint`), and a test that sends Ctrl-C waits forever for an exit that
    cannot come. This was the "hang after Ctrl-C in full test runs" of rounds 9-10 (its stack: an unsliced
    ``concurrent.futures.wait``): runs started that way hung, runs in the foreground never did."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


#: test modules left out of ``--quick``: each builds a study, a validation table, an RTL simulation, a browser,
#: a full-size (0.5B) integer model or runs hundreds of hypothesis examples of a simulator (measured with
#: HWMODEL_TEST_TIMES; docs/testing.md)
SLOW_MODULES = frozenset(
    {
        "test_readme",
        "test_validation",
        "test_notebooks",
        "test_browser",
        "test_kvmu_rtl",
        "test_kvmu_rtl_synth",
        "test_kvmu_properties",
        "test_functional",
        "test_functional_cosim",
        "test_functional_kvmu",
        "test_functional_ref",
        "test_streaming_equivalence",
        "test_streaming_validation",
        "test_reasoning_validation",
        "test_reasoning_system",
        "test_reasoning_warmup",
        "test_serving_scale",
        "test_dse_runner",
        "test_dse_dask",
        "test_study_runner",
        "test_study_freq",
        "test_backtrack_fit",
        "test_graph_conservation",
        "test_hbm",
        "test_hbm_switch",
        "test_fuzz_readers",
        "test_api",
        "test_engine_roles",
        "test_interop",
        "test_calibration",
        # the five largest of the quick selection in a cold-cache run (#30: 27, 16, 11, 10, 8 CPU-s of 213): a
        # read-only install that compiles every kernel uncached, the full-size host LM head, replays and the
        # instruction model inside the DSE, the Ramulator 2 peer traces
        "test_fault_readonly",
        "test_functional_gemv",
        "test_dse_replay",
        "test_dse_instruction",
        "test_hbm_peer",
        # RTL simulations like test_kvmu_rtl's (16 and 12 CPU-s of a 158 CPU-s quick run, December 2026): the
        # planted-bug fixtures and the CLI's campaign and verdict runs
        "test_kvmu_rtl_planted",
        "test_kvmu_rtl_cli",
        # the two largest of a 188 CPU-s quick run on a 2-core machine (2026-12-03; 110.8 s, target 90 s): the
        # published designs' tokens (13 CPU-s, one module fixture) and the overlap-load equivalence runs (16)
        "test_published_designs",
        "test_overlap_loads",
    }
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: left out of `tasks.py test --quick` (tests/conftest.py SLOW_MODULES, or the test's own mark)"
    )
    config.addinivalue_line(
        "markers",
        "in_process: a README example run in-process after a fixture (tests/conftest.py README_AFTER_FIXTURE)",
    )


#: fixture scopes built once per worker that receives a test using them (function scope is per test anyway)
SHARED_SCOPES = frozenset({"module", "package", "session"})


def shared_fixture_group(item: pytest.Item) -> str | None:
    """The xdist group of a test that uses a shared fixture: the fixtures' module (or the fixture's name for a
    session/package fixture of a conftest), so every test reading that fixture runs on one worker."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    keys = set()
    for name in info.names_closure:
        for fixdef in info.name2fixturedefs.get(name, ()):
            if fixdef.scope in SHARED_SCOPES and fixdef.baseid:  # baseid "": a plugin's (tmp_path_factory, ...)
                keys.add(fixdef.baseid if fixdef.scope == "module" else f"{fixdef.scope}:{fixdef.argname}")
    return sorted(keys)[0] if keys else None


#: README examples (first word after ``hwmodel``) that compute what a test module's shared fixture computes, and
#: that module: the example joins the module's xdist group, runs after its tests and runs in-process
#: (tests/test_readme.py), so it reuses the engines, compilers and tables the fixture memoized in that worker
#: instead of building them again (`hwmodel validate --system-a-limit 2 --system-b-requests 20 --no-cv --json`: 82
#: CPU-s with cold engine tables, 46 in a fresh process after the fixture, 7 in-process after it; numba kernels
#: cached in all three)
README_AFTER_FIXTURE = {"validate": "tests/test_validation.py"}


def _readme_follows(item: pytest.Item) -> str | None:
    """The test module a README example case should run after (README_AFTER_FIXTURE), if any."""
    chain = getattr(getattr(item, "callspec", None), "params", {}).get("chain")
    if not item.name.startswith("test_readme_example_runs") or not chain:
        return None
    words = chain[0].split()
    return README_AFTER_FIXTURE.get(words[1]) if len(words) > 1 and words[0] == "hwmodel" else None


@pytest.hookimpl(tryfirst=True)  # before xdist's worker hook, which reads the xdist_group marks to group by
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    followers: dict[str, list[pytest.Item]] = {}
    for item in items:
        if item.path.stem in SLOW_MODULES or item.name.startswith("test_readme_example_runs"):
            item.add_marker(pytest.mark.slow)
        group = shared_fixture_group(item)
        module = _readme_follows(item)
        if module is not None:
            followers.setdefault(module, []).append(item)
            group = module
            item.add_marker(pytest.mark.in_process)  # tests/test_readme.py runs it in this worker's process
        if group is not None and not any(m.name == "xdist_group" for m in item.iter_markers()):
            item.add_marker(pytest.mark.xdist_group(group))
    for module, after in followers.items():  # each after the last test of its module (a worker runs a group in order)
        rest = [i for i in items if i not in after]
        last = max((k for k, i in enumerate(rest) if i.nodeid.split("::")[0] == module), default=len(rest) - 1)
        items[:] = rest[: last + 1] + after + rest[last + 1 :]
    items.sort(key=lambda i: _start_rank(i, _readme_follows(i)))  # stable: the order within each module is kept


#: the modules holding the suite's longest work units (a shared fixture's group or one long test; CPU-s measured
#: with HWMODEL_TEST_TIMES, kernels cached: the validation table with its README follower 103, the 0.5B functional
#: run 36 and the small one 17, the read-only install 37, the GPU re-fit group about 25), longest first, collected
#: first. pytest-xdist hands out work units in collection order after sorting them by their number of tests
#: (``--loadscope-reorder``, its default; the sort is stable), so among units of one size these start first: the
#: 0.5B run is the first single-test unit instead of one in the middle, and the run ends on short tests
START_FIRST = (
    "tests/test_validation.py",
    "tests/test_functional.py",
    "tests/faults/test_fault_readonly.py",
    "tests/test_calibration.py",
)


def _start_rank(item: pytest.Item, follows: str | None) -> int:
    """Where a test's module is in :data:`START_FIRST` (a README example by the module it follows), else after."""
    module = follows or item.nodeid.split("::")[0]
    return START_FIRST.index(module) if module in START_FIRST else len(START_FIRST)


def _cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    log = os.environ.get("HWMODEL_TEST_TIMES")
    if not log:
        return (yield)
    wall0, cpu0 = time.perf_counter(), _cpu_s()
    try:
        return (yield)
    finally:
        rec = {"test": item.nodeid, "wall_s": round(time.perf_counter() - wall0, 3), "cpu_s": round(_cpu_s() - cpu0, 3)}
        with Path(log).open("a", encoding="utf-8") as f:
            f.write(json.dumps(rec) + "\n")
