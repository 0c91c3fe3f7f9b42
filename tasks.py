#!/usr/bin/env python3
"""Two set-up commands for a fresh machine with only Python >= 3.11.

    python3 tasks.py run     # create .venv on first use, then `hwmodel reproduce` (built-in defaults)
    python3 tasks.py test    # create .venv on first use, then the whole test suite (pytest -n 2)
    python3 tasks.py test --quick   # the inner loop: the suite without the tests marked `slow` (about 90 s)
    python3 tasks.py lint    # ruff check, ruff format --check, mypy (strict parts), lint-imports (the layers)

Extra arguments are passed through (`python3 tasks.py run --help`, `python3 tasks.py test -k kvmu`).
`--quick` is `-m "not slow"`; the `slow` marker is given in tests/conftest.py (SLOW_MODULES: studies, validation,
RTL and browser runs, full-size models, long hypothesis runs, the README examples). docs/testing.md has the rest.
The virtual environment is rebuilt when pyproject.toml changes (a hash stamp in .venv).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
STAMP = VENV / ".hwmodel-install-stamp"


def _bin(name: str) -> Path:
    sub = "Scripts" if os.name == "nt" else "bin"
    return VENV / sub / name


#: bumped when the way .venv is built changes (2: its packages' bytecode compiled; an older .venv is completed once)
VENV_LAYOUT = 2


def _wanted_stamp() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest() + f"+{VENV_LAYOUT}"


def compile_bytecode(path: Path, skip: str | None = None) -> None:
    """Byte-compile the modules under ``path`` (``skip``: a regex of paths left out) -- what pip does at install,
    which uv does not by default, and the checkout's own sources are never installed. Python reads the files even
    where ``PYTHONDONTWRITEBYTECODE`` is set (as in many container images), where it would otherwise compile every
    module from source in every process: 5.1 s instead of 2.3 s to import the CLI, Numba, SciPy and JAX, paid by
    each of the test suite's hundreds of subprocesses. Incremental: up-to-date files are only checked."""
    skip_args = ["-x", skip] if skip else []
    cmd = [str(_bin("python")), "-m", "compileall", "-q", "-j", "0", *skip_args, str(path)]
    subprocess.run(cmd, check=False, cwd=ROOT, stdout=subprocess.DEVNULL)


#: what no run imports: the packages' own test suites, and the installers (used only to build .venv); 28 % of the
#: .py files, compiling the rest takes 9.6 s instead of 14.3 s (wall, 2 cores, a fresh .venv). Such a module if
#: imported still works, compiled in memory.
SITE_SKIP = r"[/\\](tests?|pip|setuptools)[/\\]"


def _site_packages() -> list[Path]:
    return sorted(VENV.glob("lib*/python3*/site-packages")) + sorted(VENV.glob("Lib/site-packages"))


#: the installer bootstrapped into .venv from PyPI (pinned: a new release never changes a build that passed); it
#: resolves and installs the project's wheels in parallel, in seconds where pip takes minutes. Any failure of it
#: falls back to plain pip, and HWMODEL_INSTALLER=pip skips it.
UV = "uv==0.13.8"


def _pip_settings() -> dict[str, str]:
    """pip's own configuration (files and PIP_* variables: `pip config list`) as uv's variables, so uv sees the
    same indexes, local wheel folders, constraints and certificates as pip; a local folder or file:// index that
    does not exist is left out (pip only warns about those)."""
    out = subprocess.run(
        [str(_bin("python")), "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
    ).stdout
    conf: dict[str, str] = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            conf[key.split(".", 1)[-1]] = value.strip().strip("'\"")  # ":env:.find-links" and "global.find-links"

    def present(items: str) -> str:
        keep = [
            i
            for i in items.split()
            if not (i.startswith("file://") or i.startswith("/")) or Path(i.removeprefix("file://")).exists()
        ]
        return " ".join(keep)

    env = {}
    for pip_key, uv_key in (
        ("index-url", "UV_INDEX_URL"),
        ("extra-index-url", "UV_EXTRA_INDEX_URL"),
        ("find-links", "UV_FIND_LINKS"),
        ("constraint", "UV_CONSTRAINT"),
        ("cert", "SSL_CERT_FILE"),
    ):
        value = present(conf.get(pip_key, ""))
        if value and uv_key not in os.environ:
            env[uv_key] = value.replace(" ", ",") if uv_key == "UV_FIND_LINKS" else value
    if ("UV_EXTRA_INDEX_URL" in env or "UV_INDEX_URL" in env) and "UV_INDEX_STRATEGY" not in os.environ:
        env["UV_INDEX_STRATEGY"] = "unsafe-best-match"  # pip's rule: every version of every index, the best wins
    return env


def _install(spec: str) -> None:
    """``pip install -e spec`` into .venv: through uv when it can be bootstrapped, else (or when it fails) pip."""
    pip = [str(_bin("python")), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    if os.environ.get("HWMODEL_INSTALLER", "uv") != "pip":
        try:
            subprocess.run(pip + [UV], check=True, cwd=ROOT)
            env = {**os.environ, **_pip_settings(), "VIRTUAL_ENV": str(VENV)}
            subprocess.run(
                [str(_bin("uv")), "pip", "install", "-q", "--python", str(_bin("python")), "-e", spec],
                check=True,
                cwd=ROOT,
                env=env,
            )
            return
        except (OSError, subprocess.CalledProcessError) as exc:
            print(f"[tasks] uv could not install ({exc}); installing with pip instead", flush=True)
    subprocess.run(pip + ["-e", spec], check=True, cwd=ROOT)


def ensure_venv() -> None:
    """Create .venv and install the project with its dev extra, once per pyproject.toml version."""
    if sys.version_info < (3, 11):  # noqa: UP036 - tasks.py runs under any python3 and says what it needs
        sys.exit(f"hwmodel needs Python >= 3.11; this is {sys.version.split()[0]}")
    if STAMP.exists() and STAMP.read_text() == _wanted_stamp():
        return
    if not _bin("python").exists():
        print(f"[tasks] creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    print("[tasks] installing hwmodel and its dependencies into .venv (first use only)", flush=True)
    _install(f"{ROOT}[dev]")
    for site in _site_packages():
        compile_bytecode(site, skip=SITE_SKIP)
    STAMP.write_text(_wanted_stamp())


#: the codebase's checks (pyproject.toml configures each; docs/architecture.md)
LINTERS = (("ruff", "check", "."), ("ruff", "format", "--check", "."), ("mypy",), ("lint-imports",))


def lint() -> int:
    """Every check of LINTERS, each reported; non-zero if any fails."""
    failed = []
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # lint-imports resolves the packages from the checkout
    for tool, *args in LINTERS:
        print(f"[tasks] {tool} {' '.join(args)}", flush=True)
        if subprocess.run([str(_bin(tool)), *args], cwd=ROOT, env=env).returncode != 0:
            failed.append(tool)
    if failed:
        print(f"[tasks] failed: {', '.join(failed)}", flush=True)
    return 1 if failed else 0


#: the kernel warm-up (tests/warm_kernels.py): one process per core compiles the Numba kernels into the on-disk
#: cache before the test workers start, so that on a fresh checkout they load them instead of each compiling them
WARM_PROCESSES = 2


def start_warm_kernels(parts: int) -> list[subprocess.Popen[bytes]]:
    """Start the kernel warm-up processes (each compiles every ``parts``-th family of tests/warm_kernels.py)."""
    cmd = [str(_bin("python")), "-m", "tests.warm_kernels"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return [subprocess.Popen([*cmd, str(i), str(parts)], cwd=ROOT, env=env) for i in range(parts)]


def _whole_suite(args: list[str]) -> bool:
    """No test selection beyond markers (no -k, no test file, folder or node id): the run needs every kernel."""
    return not any(a.startswith("-k") or (ROOT / a.split("::")[0]).exists() for a in args if a)


def _all_studies(args: list[str]) -> bool:
    """`hwmodel reproduce` with no study named (only ``--out DIR``, ``--jobs N``): the run that needs every kernel."""
    it = iter(args)
    for a in it:
        if a in ("--out", "--jobs"):
            next(it, None)
        elif not a.startswith(("--out=", "--jobs=")) and (a in ("--help", "-h") or not a.startswith("-")):
            return False
    return True


def _one_at_a_time(args: list[str]) -> bool:
    """`hwmodel reproduce --jobs 1` (or a machine with one core): the studies run one after another."""
    jobs = next((b for a, b in zip(args, args[1:]) if a == "--jobs"), None)
    jobs = next((a.split("=", 1)[1] for a in args if a.startswith("--jobs=")), jobs)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return jobs == "1" or (jobs is None and cores <= 1)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"run", "test", "lint"}:
        print(__doc__)
        return 2
    ensure_venv()
    task, rest = argv[0], argv[1:]
    if task == "lint":
        return lint()
    compile_bytecode(ROOT, skip=r"[/\\](\.venv|\.git|out)[/\\]")  # the checkout's own modules, tests included
    if task == "run":
        # every study: `hwmodel reproduce` runs them side by side, one per core, each compiling the kernels it needs
        # as it goes (a warm-up beside them would compile the same kernels at the same moment); one after another
        # (--jobs 1), the other core compiles the kernels the later studies need
        warm = start_warm_kernels(1) if _all_studies(rest) and _one_at_a_time(rest) else []
        try:
            return subprocess.run([str(_bin("hwmodel")), "reproduce", *rest], cwd=ROOT).returncode
        finally:
            for p in warm:
                p.wait()
    if "--quick" in rest:
        rest = [a for a in rest if a != "--quick"] + ["-m", "not slow"]
    workers = ["-n", "2"] if not any(a.startswith("-n") for a in rest) else []
    if _whole_suite(rest):
        for p in start_warm_kernels(WARM_PROCESSES):
            p.wait()
    cmd = [str(_bin("python")), "-m", "pytest", "-q", *workers, *rest]
    return subprocess.run(cmd, cwd=ROOT, env=pytest_env()).returncode


def pytest_env() -> dict[str, str]:
    """The test task's environment: this one, but pytest may keep its rewritten test modules. pytest rewrites each
    test module's asserts when it imports it and caches the result beside it (``__pycache__/*-pytest-*.pyc``) unless
    ``PYTHONDONTWRITEBYTECODE`` is set, as in many container images and this project's VMs: then each xdist
    worker rewrote all of them in every run (collection 8.9 CPU-s per worker instead of 4.8, 2-core VM, 2026-12-07).
    :func:`compile_bytecode` cannot make those files: they are pytest's, not Python's."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
