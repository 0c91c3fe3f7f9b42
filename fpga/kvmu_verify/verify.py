"""`hwmodel kvmu verify`: the model as the scoreboard of a user's KVMU RTL.

Hypothesis draws examples (:mod:`fpga.kvmu_verify.streams`); each runs on the RTL in one long simulation
(:class:`fpga.kvmu_verify.session.RtlSession`, reset between examples) and on the model's per-cycle kernel
(:func:`fpga.kvmu.kernel_per_cycle`), and every contract signal is compared in every cycle
(:func:`fpga.kvmu_verify.contract.compare`). On the first mismatch hypothesis shrinks the example, each shrink
candidate again one example on the running simulator; the result is the shrunk command file, the first differing
cycle and signal, and VCDs of the model (fpga/kvmu_vcd.py) and of the RTL (the simulator's own dump, from a second,
one-example simulation).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from fpga.kvmu_codes import Op
from fpga.kvmu_verify.contract import BusCommand, Example, Mismatch, compare, model_trace
from fpga.kvmu_verify.session import RtlSession

DEFAULT_EXAMPLES = 1000
DEFAULT_SEED = 0


class _Mismatch(Exception):
    def __init__(self, example: Example, mismatch: Mismatch) -> None:
        super().__init__(mismatch.describe(example))
        self.example = example
        self.mismatch = mismatch


@dataclass
class VerifyResult:
    """Outcome of a verification run."""

    examples_asked: int
    examples_passed: int
    simulator_runs: int  # examples driven on the RTL, shrinking included
    example: Example | None = None  # the shrunk counterexample
    mismatch: Mismatch | None = None
    files: dict[str, Path] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.mismatch is None and self.examples_passed >= self.examples_asked

    def message(self) -> str:
        if self.mismatch is None:
            return (f"{self.examples_passed} of {self.examples_asked} examples passed "
                    f"({self.simulator_runs} simulated)")
        assert self.example is not None
        return self.mismatch.describe(self.example)


def run_examples(session: RtlSession, examples: int, seed: int,
                 progress: Callable[[int], None] | None = None) -> VerifyResult:
    """Hypothesis over ``examples`` examples on a started session; shrinks the first failure."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hseed

    from fpga.kvmu_verify.streams import examples as example_strategy
    from fpga.kvmu_verify.streams import no_source_constants

    passed = 0

    @hseed(seed)
    @settings(max_examples=examples, database=None, deadline=None, derandomize=False,
              phases=[Phase.generate, Phase.shrink], suppress_health_check=list(HealthCheck),
              verbosity=Verbosity.quiet, report_multiple_bugs=False, print_blob=False)
    @given(example_strategy())
    def check(example: Example) -> None:
        nonlocal passed
        sched, observed = session.run(example)
        mm = compare(sched, observed)
        if mm is not None:
            raise _Mismatch(example, mm)
        passed += 1
        if progress is not None:
            progress(passed)

    try:
        with no_source_constants():
            check()
    except _Mismatch as e:
        example, mismatch = minimize(session, e.example, e.mismatch)
        return VerifyResult(examples, passed, session.examples_run, example, mismatch)
    return VerifyResult(examples, passed, session.examples_run)


MINIMIZE_BUDGET = 3000


def _simpler_args(c: BusCommand) -> list[BusCommand]:
    """Candidates for one command, each simpler than it: the wait driven on the bus rather than idle, a count
    toward 1 (from above) or toward 0 (from below), a position toward 0."""
    out = []
    if c.idle:
        out.append(replace(c, idle=False))
    a = c.arg
    if a > 0:
        floor = 0 if c.op == Op.INIT else 1
        out += [replace(c, arg=v) for v in dict.fromkeys((floor, a // 2, a - 1)) if floor <= v < a]
    elif a < 0:
        out += [replace(c, arg=v) for v in dict.fromkeys((0, -1, a // 2)) if a < v <= 0]
    return out


def minimize(session: RtlSession, example: Example, mismatch: Mismatch,
             budget: int = MINIMIZE_BUDGET) -> tuple[Example, Mismatch]:
    """Greedy reduction after hypothesis's shrink (whose command deletions change how later draws read, so it
    can stop short): delete runs of commands, then simplify arguments and the capacity, keeping any change after
    which the RTL still differs from the model. Deterministic; at most ``budget`` more examples simulated."""
    runs = 0

    def fails(candidate: Example) -> Mismatch | None:
        nonlocal runs
        runs += 1
        sched, observed = session.run(candidate)
        return compare(sched, observed)

    improved = True
    while improved and runs < budget:
        improved = False
        cmds = example.commands
        size = max(1, len(cmds) // 2)
        while size >= 1 and runs < budget:  # delete runs of `size` commands
            i = 0
            while i + size <= len(example.commands) and runs < budget:
                cand = replace(example, commands=example.commands[:i] + example.commands[i + size:])
                mm = fails(cand)
                if mm is not None:
                    example, mismatch, improved = cand, mm, True
                else:
                    i += 1
            size //= 2
        for i in range(len(example.commands)):  # simpler arguments
            for simpler in _simpler_args(example.commands[i]):
                if runs >= budget:
                    break
                cand = replace(example, commands=example.commands[:i] + (simpler,) + example.commands[i + 1:])
                mm = fails(cand)
                if mm is not None:
                    example, mismatch, improved = cand, mm, True
                    break
        for cap in dict.fromkeys((1, example.capacity // 2, example.capacity - 1)):  # a smaller capacity
            if 1 <= cap < example.capacity and runs < budget:
                cand = replace(example, capacity=cap)
                mm = fails(cand)
                if mm is not None:
                    example, mismatch, improved = cand, mm, True
                    break
    if example.noise_seed != 0:
        cand = replace(example, noise_seed=0)
        mm = fails(cand)
        if mm is not None:
            example, mismatch = cand, mm
    return example, mismatch


def verify(sources: Sequence[Path], top: str, *, simulator: str = "icarus", examples: int = DEFAULT_EXAMPLES,
           seed: int = DEFAULT_SEED, out_dir: Path | None = None,
           progress: Callable[[int], None] | None = None) -> VerifyResult:
    """Verify ``sources`` (top module ``top``) against the model on ``examples`` hypothesis examples. On a
    mismatch, and when ``out_dir`` is given, writes ``counterexample.txt`` (the shrunk command file),
    ``model.vcd`` and ``rtl.vcd`` there."""
    with RtlSession(sources, top, simulator) as session:
        result = run_examples(session, examples, seed, progress)
    if result.example is not None and out_dir is not None:
        result.files = write_counterexample(result.example, result.mismatch, sources, top, simulator, out_dir)
    return result


def write_counterexample(example: Example, mismatch: Mismatch | None, sources: Sequence[Path], top: str,
                         simulator: str, out_dir: Path) -> dict[str, Path]:
    """The shrunk command file, the model's VCD, and the RTL's VCD (one more one-example simulation)."""
    from fpga.kvmu import write_vcd

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"commands": out_dir / "counterexample.txt", "model_vcd": out_dir / "model.vcd",
             "rtl_vcd": out_dir / "rtl.vcd"}
    head = ["# hwmodel kvmu verify: shrunk counterexample"]
    if mismatch is not None:
        head.append(f"# {mismatch.describe(example)}")
    head.append("# model cycle t = the t-th rising edge after reset: at 35 + 10 t ns in rtl.vcd (a 10 ns clock, "
                "two reset edges), at 10 t ns in model.vcd; see docs/kvmu.md")
    files["commands"].write_text("\n".join(head) + "\n" + example.command_file())
    write_vcd(model_trace(example), files["model_vcd"], clock_hz=100e6, clock_signal=True)
    with RtlSession(sources, top, simulator, vcd=files["rtl_vcd"]) as session:
        session.run(example)
    return files
