"""A simulator session: the user's RTL plus the testbench top, built once with cocotb's runner
(``cocotb_tools.runner``) and run as one long simulation that serves many examples over a Unix socket (each
example starts with its own reset edges). One simulator start for a whole verification run, however many examples hypothesis asks for
while it generates and shrinks."""

from __future__ import annotations

import json
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from fpga.kvmu.verify.contract import Example, Schedule, schedule
from fpga.kvmu.verify.wrapper import TB_TOP, wrapper_source
from hwmodel.errors import HwmodelError

SIMULATORS = ("icarus", "verilator")
#: The OS package (Debian / Ubuntu) and executable each simulator needs, and the minimum version cocotb 2 takes.
SIM_PACKAGE = {"icarus": ("iverilog", "iverilog"), "verilator": ("verilator", "verilator")}
TB_MODULE = "_hwmodel_kvmu_tb"  # fpga/kvmu/verify/tb.py, copied into the work directory under this name


class SimulatorMissing(HwmodelError):
    """No simulator or no cocotb: what to install."""


class RtlBuildError(HwmodelError):
    """The user's RTL (with the testbench top) did not compile."""


def missing_tool(simulator: str = "icarus") -> str | None:
    """None when ``simulator`` and cocotb are usable, else one line saying what to install."""
    if simulator not in SIMULATORS:
        return f"unknown simulator '{simulator}'; expected one of {', '.join(SIMULATORS)}"
    package, exe = SIM_PACKAGE[simulator]
    try:
        import cocotb  # noqa: F401
        import cocotb_tools.runner  # noqa: F401
        import hypothesis  # noqa: F401
    except ImportError:
        return (
            "kvmu verify needs cocotb and hypothesis: pip install 'cocotb>=2.0,<3' 'hypothesis>=6.100,<7' "
            "(the rtl extra: pip install 'hwmodel[rtl]')"
        )
    try:
        from find_libpython import find_libpython  # cocotb's own dependency

        if find_libpython() is None:
            return (
                f"cocotb embeds Python in the simulator and needs this Python's shared library (libpython"
                f"{sys.version_info.major}.{sys.version_info.minor}.so), which was not found: use a Python "
                f"built with --enable-shared (e.g. apt-get install libpython{sys.version_info.major}."
                f"{sys.version_info.minor})"
            )
    except ImportError:  # pragma: no cover - older cocotb without find_libpython
        pass
    if shutil.which(exe) is None:
        return f"kvmu verify --simulator {simulator} needs {exe} on PATH: apt-get install {package}"
    if simulator == "icarus" and shutil.which("vvp") is None:
        return "kvmu verify --simulator icarus needs vvp on PATH: apt-get install iverilog"
    if simulator == "verilator":
        found = _verilator_version()
        if found is not None and found < VERILATOR_MIN:
            return (
                f"kvmu verify --simulator verilator needs Verilator {_ver(VERILATOR_MIN)}+ (the oldest cocotb "
                f"2 supports), found {_ver(found)}: install a newer verilator or use --simulator icarus"
            )
    return None


VERILATOR_MIN = (5, 36)


def _ver(v: tuple[int, int]) -> str:
    return f"{v[0]}.{v[1]:03d}"


def _verilator_version() -> tuple[int, int] | None:
    import re
    import subprocess

    try:
        out = subprocess.run(["verilator", "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"Verilator\s+(\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _first_error(log: Path, fallback: str) -> str:
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return fallback
    for ln in lines:
        if "error" in ln.lower() or "syntax" in ln.lower() or "unknown module" in ln.lower():
            return ln
    return lines[-1] if lines else fallback


class RtlSession:
    """Build ``sources`` with top module ``top`` and serve examples to the simulator.

    ``run(example)`` returns the observed packed outputs, one binary string per schedule row. Use as a context
    manager; ``vcd`` makes the simulator dump the user's module (every example served goes in the file)."""

    def __init__(
        self,
        sources: Sequence[Path],
        top: str,
        simulator: str = "icarus",
        *,
        work_dir: Path | None = None,
        vcd: Path | None = None,
        timeout_s: float = 600.0,
    ) -> None:
        why = missing_tool(simulator)
        if why:
            raise SimulatorMissing(why)
        for s in sources:
            if not Path(s).is_file():
                raise RtlBuildError(f"{s}: no such RTL file")
        self.sources = [Path(s).resolve() for s in sources]
        self.top = top
        self.simulator = simulator
        self.vcd = Path(vcd).resolve() if vcd else None
        self.timeout_s = timeout_s
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="kvmu_rtl_"))
        self._sock: socket.socket | None = None
        self._conn: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self.examples_run = 0

    # ---- lifecycle
    def __enter__(self) -> RtlSession:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def build(self) -> None:
        from cocotb_tools.runner import get_runner

        self.work_dir.mkdir(parents=True, exist_ok=True)
        wrap = self.work_dir / f"{TB_TOP}.v"
        try:
            wrap.write_text(wrapper_source(self.top))
        except ValueError as e:
            raise RtlBuildError(str(e)) from None
        runner = get_runner(self.simulator)
        log = self.work_dir / "build.log"
        build_args = ["-Wall"] if self.simulator == "icarus" else []
        if self.simulator == "verilator":
            build_args = ["--timing", "-Wno-fatal"]
        try:
            runner.build(
                sources=[*self.sources, wrap],
                hdl_toplevel=TB_TOP,
                build_dir=self.work_dir / "build",
                always=True,
                timescale=("1ns", "1ps"),
                build_args=build_args,
                log_file=log,
            )
        except (SystemExit, Exception) as e:  # the runner raises CalledProcessError / SystemExit on a failed build
            names = " ".join(str(s) for s in self.sources)
            raise RtlBuildError(
                f"{names} (top '{self.top}'): {self.simulator} build failed: "
                f"{_first_error(log, str(e))} (full log: {log})"
            ) from None
        if self.vcd is not None and self.simulator == "icarus" and hasattr(runner, "_test_command"):
            # the runner passes vvp "-none" (dumping off) unless its own FST waves are on; the testbench top
            # dumps VCD itself (+kvmu_vcd=PATH), so ask vvp for VCD instead
            plain = runner._test_command

            def vcd_command() -> list:
                return [[("-vcd" if arg == "-none" else arg) for arg in cmd] for cmd in plain()]

            runner._test_command = vcd_command
        self._runner = runner

    def start(self) -> None:
        self.build()
        sock_path = Path(tempfile.mkdtemp(prefix="kvmu_sock_")) / "s"
        self._sock_path = sock_path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(sock_path))
        self._sock.listen(1)
        self._sock.settimeout(self.timeout_s)
        env = {"HWMODEL_KVMU_SOCKET": str(sock_path)}
        # The simulator's Python imports only cocotb and the testbench module, never hwmodel: the runner hands it
        # this process's sys.path, to which the work directory (holding the module) is appended until close().
        (self.work_dir / f"{TB_MODULE}.py").write_text((Path(__file__).parent / "tb.py").read_text())
        self._path_entry = str(self.work_dir.resolve())
        sys.path.append(self._path_entry)
        plusargs = [f"+kvmu_vcd={self.vcd}"] if self.vcd else []
        log = self.work_dir / "sim.log"

        def target() -> None:
            try:
                self._runner.test(
                    test_module=TB_MODULE,
                    hdl_toplevel=TB_TOP,
                    hdl_toplevel_lang="verilog",
                    build_dir=self.work_dir / "build",
                    test_dir=self.work_dir,
                    extra_env=env,
                    plusargs=plusargs,
                    log_file=log,
                    results_xml=str(self.work_dir / "results.xml"),
                )
            except BaseException as e:  # noqa: BLE001 - reported by run()
                self._error = e
            finally:
                if self._sock is not None:
                    try:  # unblock accept() if the simulator died before connecting
                        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect(str(sock_path))
                    except OSError:
                        pass

        self._thread = threading.Thread(target=target, name="kvmu-sim", daemon=True)
        self._thread.start()
        try:
            conn, _ = self._sock.accept()
        except TimeoutError:
            raise RtlBuildError(f"the simulator did not start within {self.timeout_s:g} s (log: {log})") from None
        self._conn = conn
        self._conn.settimeout(self.timeout_s)
        self._reader = conn.makefile("r", encoding="ascii")
        self._writer = conn.makefile("w", encoding="ascii")

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._writer.write(json.dumps({"stop": True}) + "\n")
                self._writer.flush()
            except OSError:
                pass
            self._conn.close()
            self._conn = None
        if self._thread is not None:
            self._thread.join(timeout=60)
            self._thread = None
        if getattr(self, "_path_entry", None) in sys.path:
            sys.path.remove(self._path_entry)
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            shutil.rmtree(self._sock_path.parent, ignore_errors=True)
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    # ---- examples
    def run(self, example: Example, sched: Schedule | None = None) -> tuple[Schedule, list[str]]:
        """Drive one example; returns the model's schedule and the RTL's observed outputs (one per observed
        row)."""
        sched = sched if sched is not None else schedule(example)
        req = {"capacity": example.capacity, "segments": sched.segments, "observe": sched.observe.tolist()}
        try:
            self._writer.write(json.dumps(req) + "\n")
            self._writer.flush()
            line = self._reader.readline()
        except OSError as e:
            line = ""
            self._error = self._error or e
        if not line:
            log = self.work_dir / "sim.log"
            raise RtlBuildError(f"the simulator stopped ({_first_error(log, 'no output')}; log: {log})")
        self.examples_run += 1
        return sched, json.loads(line)["observed"]
