"""`hwmodel kvmu verify`: the model as the scoreboard of a user's KVMU RTL.

Hypothesis draws examples (:mod:`fpga.kvmu.verify.streams`); each runs on the RTL in one long simulation
(:class:`fpga.kvmu.verify.session.RtlSession`, reset before each example and at the example's own resets) and on
the model's per-cycle kernel (:func:`fpga.kvmu.model.kernel_per_cycle`), and every contract signal is compared in every
observed cycle (:func:`fpga.kvmu.verify.contract.compare`). On the first mismatch hypothesis shrinks the example,
then :func:`minimize` reduces it further; the result is replayed on a fresh simulator before it is reported, so a
counterexample never depends on what ran before it. A failure that needs an earlier example (state that survives
reset) is reported as such, with both command streams. The verdict also carries the functional coverage of the
examples run (:mod:`fpga.kvmu.verify.coverage`), and VCDs of the model (fpga/kvmu/vcd.py) and of the RTL (the
simulator's own dump, from one more simulation).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from fpga.kvmu.codes import Op
from fpga.kvmu.verify.contract import RESET_OP, BusCommand, Example, Mismatch, compare, model_trace
from fpga.kvmu.verify.coverage import Coverage
from fpga.kvmu.verify.session import RtlSession
from hwmodel.errors import HwmodelError

DEFAULT_EXAMPLES = 1000
DEFAULT_SEED = 0

#: Verdicts: the RTL passed; it differs from the model (a counterexample that fails from reset on a fresh
#: simulator); its state survives reset (an example fails only after another one); a failure seen once that no
#: fresh replay reproduces; the simulator stopped or misbehaved during the run.
PASS, MISMATCH, SURVIVES_RESET, NOT_REPRODUCIBLE, SIMULATOR_ERROR = (
    "pass",
    "mismatch",
    "state survives reset",
    "not reproducible",
    "simulator error",
)


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
    simulator_runs: int  # examples driven on the RTL, shrinking and replays included
    example: Example | None = None  # the shrunk counterexample (the second example of a pair for SURVIVES_RESET)
    mismatch: Mismatch | None = None
    files: dict[str, Path] = field(default_factory=dict)
    verdict: str = PASS
    before: Example | None = None  # SURVIVES_RESET: the example whose state the failing one inherits
    error: str | None = None  # SIMULATOR_ERROR / NOT_REPRODUCIBLE: what happened
    coverage: Coverage | None = None

    @property
    def passed(self) -> bool:
        return self.verdict == PASS and self.examples_passed >= self.examples_asked

    def message(self) -> str:
        if self.verdict == PASS:
            return f"{self.examples_passed} of {self.examples_asked} examples passed ({self.simulator_runs} simulated)"
        if self.verdict == SIMULATOR_ERROR:
            return f"simulator error after {self.examples_passed} passing examples: {self.error}"
        if self.verdict == NOT_REPRODUCIBLE:
            return f"a failure seen once did not reproduce on a fresh simulator: {self.error}"
        assert self.example is not None and self.mismatch is not None
        diff = self.mismatch.describe(self.example)
        if self.verdict == SURVIVES_RESET:
            return (
                f"state survives reset: the second example passes alone on a fresh simulator but fails right "
                f"after the first one; {diff}"
            )
        return diff


@dataclass
class _History:
    """What the session ran, for replays: the last example run and the first failure with its predecessor."""

    last: Example | None = None
    first_fail: tuple[Example | None, Example, Mismatch] | None = None

    def run(self, session: RtlSession, example: Example) -> Mismatch | None:
        sched, observed = session.run(example)
        mm = compare(sched, observed)
        if mm is not None and self.first_fail is None:
            self.first_fail = (self.last, example, mm)
        self.last = example
        return mm


def run_examples(
    session: RtlSession,
    examples: int,
    seed: int,
    progress: Callable[[int], None] | None = None,
    fresh: Callable[[], RtlSession] | None = None,
    shrink: bool = True,
) -> VerifyResult:
    """Hypothesis over ``examples`` examples on a started session; shrinks the first failure with
    :func:`minimize` (unless not ``shrink``: the mutation campaign asks only whether a mutant is caught) and,
    when ``fresh`` makes new sessions, replays it from a fresh simulator before reporting it. Hypothesis's own
    shrinker is not used: it costs thousands of simulations on examples with long runs, where the greedy
    reduction of :func:`minimize`, which knows the commands, takes tens to hundreds."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hseed

    from fpga.kvmu.verify.streams import examples as example_strategy
    from fpga.kvmu.verify.streams import no_source_constants

    passed = 0
    hist = _History()
    cov = Coverage()

    @hseed(seed)
    @settings(
        max_examples=examples,
        database=None,
        deadline=None,
        derandomize=False,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
        report_multiple_bugs=False,
        print_blob=False,
    )
    @given(example_strategy())
    def check(example: Example) -> None:
        nonlocal passed
        mm = hist.run(session, example)
        if mm is not None:
            raise _Mismatch(example, mm)
        if hist.first_fail is None:
            passed += 1
            cov.add(example)
            if progress is not None:
                progress(passed)

    shrunk: tuple[Example, Mismatch] | None = None
    try:
        with no_source_constants():
            check()
    except _Mismatch as e:
        shrunk = (e.example, e.mismatch)
    except HwmodelError as e:  # the simulator stopped
        return VerifyResult(examples, passed, session.examples_run, verdict=SIMULATOR_ERROR, error=str(e), coverage=cov)
    except Exception:  # hypothesis's FlakyFailure / Flaky and the like: decided by the replays below
        if hist.first_fail is None:
            raise
    if hist.first_fail is None:
        return VerifyResult(examples, passed, session.examples_run, coverage=cov)
    first_before, first_ex, first_mm = hist.first_fail
    if not shrink:
        return VerifyResult(examples, passed, session.examples_run, first_ex, first_mm, verdict=MISMATCH, coverage=cov)
    try:
        if shrunk is not None:
            example, mismatch = minimize(session, *shrunk, hist=hist)
        else:
            example, mismatch = minimize(session, first_ex, first_mm, hist=hist)
    except HwmodelError as e:
        return VerifyResult(examples, passed, session.examples_run, verdict=SIMULATOR_ERROR, error=str(e), coverage=cov)
    result = VerifyResult(examples, passed, session.examples_run, example, mismatch, verdict=MISMATCH, coverage=cov)
    if fresh is None:
        return result
    return _replay(result, fresh, (first_before, first_ex, first_mm))


def _alone(fresh: Callable[[], RtlSession], *exs: Example) -> Mismatch | None:
    """Run ``exs`` one after the other on a fresh simulator; the last one's mismatch."""
    with fresh() as s:
        mm = None
        for ex in exs:
            sched, observed = s.run(ex)
            mm = compare(sched, observed)
        return mm


def _replay(
    result: VerifyResult, fresh: Callable[[], RtlSession], first: tuple[Example | None, Example, Mismatch]
) -> VerifyResult:
    """Decide the verdict by replays on fresh simulators: the shrunk counterexample alone, else the first failing
    example alone, else the first failing example right after the one before it."""
    before, first_ex, first_mm = first
    try:
        result.simulator_runs += 1
        assert result.example is not None
        mm = _alone(fresh, result.example)
        if mm is not None:
            result.mismatch = mm
            return result
        result.simulator_runs += 1
        mm = _alone(fresh, first_ex)
        if mm is not None:
            result.example, result.mismatch = first_ex, mm
            return result
        if before is not None:
            result.simulator_runs += 2
            mm = _alone(fresh, before, first_ex)
            if mm is not None:
                result.example, result.mismatch, result.before = first_ex, mm, before
                result.verdict = SURVIVES_RESET
                return result
    except HwmodelError as e:
        result.verdict, result.error = SIMULATOR_ERROR, str(e)
        return result
    result.verdict = NOT_REPRODUCIBLE
    result.example, result.mismatch = first_ex, first_mm
    result.error = (
        f"{first_mm.describe(first_ex)}, once; it passes on a fresh simulator, alone and after the "
        f"example before it (a race or state the testbench does not control)"
    )
    return result


MINIMIZE_BUDGET = 600
MAX_CANDIDATE_CYCLES = 2**20  # a shrink candidate longer than this is not tried (the generator stays below)


def model_cycles(example: Example) -> int:
    """Cycles the model spends on ``example`` (its segments run to the end), from the transition rule alone."""
    from fpga.kvmu.codes import Mode
    from fpga.kvmu.verify.streams import _cycles, _kernel_transition

    transition = _kernel_transition()
    total = 0
    for _, cmds, _ in example.segments():
        state = (0, 0, 0, int(Mode.INIT))
        for c in cmds:
            result = transition(c.op, c.arg, example.capacity, *state)
            state = result[1:]
            total += _cycles(c.op, c.arg, int(result[0]))
    return total


def _simpler_args(c: BusCommand) -> list[BusCommand]:
    """Candidates for one command, each simpler than it: the wait driven on the bus rather than idle, a count
    toward 1 (from above: 1, half, the power-of-two edges below it, one less) or toward 0 (from below), a
    position toward 0, a reset earlier."""
    out = []
    if c.op == RESET_OP:
        return [replace(c, arg=v) for v in dict.fromkeys((0, c.arg // 2, c.arg - 1)) if 0 <= v < c.arg]
    if c.idle:
        out.append(replace(c, idle=False))
    a = c.arg
    if a > 0:
        floor = 0 if c.op == Op.INIT else 1
        k = max(0, (a - 1).bit_length() - 1)  # the power-of-two edges at or below a: 2**k + 1, 2**k, 2**k - 1
        edges = (2**k + 1, 2**k, 2**k - 1)
        out += [replace(c, arg=v) for v in dict.fromkeys((floor, a // 2, *edges, a - 1)) if floor <= v < a]
    elif a < 0:
        out += [replace(c, arg=v) for v in dict.fromkeys((0, -1, a // 2)) if a < v <= 0]
    return out


def minimize(
    session: RtlSession,
    example: Example,
    mismatch: Mismatch,
    budget: int = MINIMIZE_BUDGET,
    hist: _History | None = None,
) -> tuple[Example, Mismatch]:
    """Greedy reduction after hypothesis's shrink (whose command deletions change how later draws read, so it
    can stop short): delete runs of commands, then simplify arguments and the capacity, keeping any change after
    which the RTL still differs from the model. Deterministic; at most ``budget`` more examples simulated."""
    runs = 0

    def fails(candidate: Example) -> Mismatch | None:
        nonlocal runs
        if model_cycles(candidate) > MAX_CANDIDATE_CYCLES:  # a simpler argument can make a refused run legal
            return None
        runs += 1
        if hist is not None:
            return hist.run(session, candidate)
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
                cand = replace(example, commands=example.commands[:i] + example.commands[i + size :])
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
                cand = replace(example, commands=example.commands[:i] + (simpler,) + example.commands[i + 1 :])
                mm = fails(cand)
                if mm is not None:
                    example, mismatch, improved = cand, mm, True
                    break
        c = example.capacity
        k = max(0, (c - 1).bit_length() - 1)
        for cap in dict.fromkeys((1, c // 2, 2**k + 1, 2**k, 2**k - 1, c - 1)):  # a smaller capacity
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


def verify(
    sources: Sequence[Path],
    top: str,
    *,
    simulator: str = "icarus",
    examples: int = DEFAULT_EXAMPLES,
    seed: int = DEFAULT_SEED,
    out_dir: Path | None = None,
    progress: Callable[[int], None] | None = None,
) -> VerifyResult:
    """Verify ``sources`` (top module ``top``) against the model on ``examples`` hypothesis examples. On a
    failure, and when ``out_dir`` is given, writes ``counterexample.txt`` (the shrunk command file; for "state
    survives reset" both examples), ``model.vcd`` and ``rtl.vcd`` there. A failed build raises RtlBuildError;
    everything that goes wrong after the simulator started is a verdict."""

    def fresh() -> RtlSession:
        return RtlSession(sources, top, simulator)

    session = RtlSession(sources, top, simulator)
    session.start()
    try:
        result = run_examples(session, examples, seed, progress, fresh=fresh)
    finally:
        session.close()
    if result.example is not None and result.verdict != SIMULATOR_ERROR and out_dir is not None:
        try:
            result.files = write_counterexample(result, sources, top, simulator, out_dir)
        except (HwmodelError, OSError) as e:  # no VCD simulation or no --out: keep the verdict, say why
            result.error = f"{result.error + '; ' if result.error else ''}counterexample files not written: {e}"
    return result


def write_counterexample(
    result: VerifyResult, sources: Sequence[Path], top: str, simulator: str, out_dir: Path
) -> dict[str, Path]:
    """The shrunk command file, the model's VCD (of the segment that differs), and the RTL's VCD (one more
    simulation of the counterexample, after its predecessor for "state survives reset")."""
    from fpga.kvmu.model import write_vcd

    example, mismatch = result.example, result.mismatch
    assert example is not None
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "commands": out_dir / "counterexample.txt",
        "model_vcd": out_dir / "model.vcd",
        "rtl_vcd": out_dir / "rtl.vcd",
    }
    head = [f"# hwmodel kvmu verify: {result.verdict}"]
    if mismatch is not None:
        head.append(f"# {mismatch.describe(example)}")
    head.append(
        "# model cycle t = the t-th rising edge after reset: at 35 + 10 t ns in rtl.vcd (a 10 ns clock, "
        "two reset edges), at 10 t ns in model.vcd; see docs/kvmu.md"
    )
    segment = mismatch.segment if mismatch is not None else 0
    if len(example.segments()) > 1:
        head.append(f"# model.vcd shows segment {segment + 1} (the commands after reset {segment})")
    body = example.command_file()
    if result.before is not None:
        head.append(
            "# the state survives reset: the second example fails only right after the first one, on one "
            "simulator (reset between them)"
        )
        body = "# first example\n" + result.before.command_file() + "# second example (fails)\n" + body
    files["commands"].write_text("\n".join(head) + "\n" + body)
    write_vcd(model_trace(example, segment), files["model_vcd"], clock_hz=100e6, clock_signal=True)
    with RtlSession(sources, top, simulator, vcd=files["rtl_vcd"]) as session:
        if result.before is not None:
            session.run(result.before)
        session.run(example)
    return files
