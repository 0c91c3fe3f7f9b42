"""Co-simulation of one (short) problem: the heteroreason replay drives the functional W8A8 draft model, so the
draft's tokens are computed, and the KVMU behind the model records every command for a VCD waveform.

The replay (:mod:`hwmodel.reasoning.sim`) issues its KVMU commands -- init, speculate, mark, accept, rollback,
ingest -- to a :class:`FunctionalDraft`, which turns them into the functional model's operations
(``fpga.functional.DraftModel``: ``prefill`` for the first init, ``decode`` per speculated token, ``ingest`` for
the target's tokens, ``mark``/``accept``/``rollback``/``init``); the model addresses its KV cache through its own
KVMU, which records, and before each command the KVMU is advanced to the replay's current time in FPGA cycles, so
the waveform shows the pointer moves when the simulated system makes them. Timing stays the streaming engine's
(the platform's); the verdicts stay the trace's. The target is not modelled functionally: its tokens, and the
prompt's, are seeded random token ids.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from hwmodel.errors import HwmodelError
from hwmodel.reasoning.platform import Platform
from hwmodel.reasoning.runner import simulate_problem
from hwmodel.reasoning.sim import ProblemOutcome
from hwmodel.workload.trace import Problem, TraceHeader, replay_of


class FunctionalDraft:
    """The KVMU interface the replay drives, forwarded to a functional draft model (module docstring)."""

    def __init__(self, model: Any, clock_hz: float, seed: int = 0) -> None:
        self.model = model
        self.kvmu = model.kvmu
        self.clock_hz = clock_hz
        self.rng = np.random.default_rng(seed)
        self.vocab = int(model.llm.vocab)
        self.drafted: list[int] = []  # every token the draft decoded, in order
        self.ingested: list[int] = []  # every token fed from the target
        self._now: Callable[[], float] | None = None
        self._started = False

    def bind_clock(self, now_fn: Callable[[], float]) -> None:
        self._now = now_fn

    def _tick(self) -> None:
        if self._now is not None:
            cycle = int(round(self._now() * self.clock_hz))
            if cycle > self.kvmu.cycle:
                self.kvmu.advance_to(cycle)

    def _ids(self, n: int) -> list[int]:
        return [int(t) for t in self.rng.integers(0, self.vocab, n)]

    # ---- the KVMU commands of the replay
    def init(self, pos: int) -> None:
        self._tick()
        if not self._started:  # the prompt's KV cache arrives: the functional model prefills the prompt itself
            self._started = True
            self.model.prefill(self._ids(pos))
        else:
            self.model.init(pos)

    def speculate(self, n: int = 1) -> None:
        self._tick()
        for _ in range(n):
            self.drafted.append(int(self.model.decode()))

    def mark(self) -> None:
        self._tick()
        self.model.mark()

    def accept(self) -> None:
        self._tick()
        self.model.accept()

    def rollback(self) -> None:
        self._tick()
        self.model.rollback()

    def ingest(self, n: int) -> None:
        self._tick()
        toks = self._ids(n)
        self.ingested.extend(toks)
        self.model.ingest(toks)

    @property
    def valid(self) -> int:
        return int(self.model.valid)

    @property
    def curr(self) -> int:
        return int(self.model.curr)

    @property
    def ahead(self) -> int:
        return int(self.model.ahead)


@dataclasses.dataclass
class CosimResult:
    outcome: ProblemOutcome
    drafted_tokens: list[int]
    ingested_tokens: list[int]
    kv_tokens: list[int]  # what the model's KV cache holds at the end, positions [0, ahead)
    vcd_path: Path | None
    kvmu_commands: int


def cosimulate(
    problem: Problem,
    header: TraceHeader,
    platform: Platform,
    model: Any,
    *,
    clock_hz: float,
    vcd_path: Path | None = None,
    seed: int = 0,
    policy: str = "heteroreason",
) -> CosimResult:
    """Replay ``problem`` under an FPGA-draft policy with ``model`` (a functional draft model whose ``kvmu``
    records) producing the draft's tokens; write the KVMU waveform to ``vcd_path``."""
    from fpga.kvmu.model import write_vcd

    rp = replay_of(problem, header)
    need = max(c + a.tokens for c, a in zip(rp.context_tokens, problem.attempts)) + max(
        a.tokens for a in problem.attempts
    )  # the longest context plus a speculated step on top
    if need > model.capacity:
        raise HwmodelError(
            f"problem {problem.id} needs up to {need} KV positions, more than the functional model's "
            f"capacity {model.capacity}: choose a shorter problem or a larger --capacity"
        )
    draft = FunctionalDraft(model, clock_hz, seed)
    pf = dataclasses.replace(platform, kvmu_factory=lambda: draft, kvmu_clocked=True)
    outcome, sim = simulate_problem(problem, header, policy, pf, keep_log=True)
    if vcd_path is not None:
        write_vcd(model.kvmu.trace(), vcd_path, clock_hz=clock_hz)
    return CosimResult(
        outcome, draft.drafted, draft.ingested, [int(t) for t in model.tokens], vcd_path, outcome.kvmu_commands
    )


def write_cosim_summary(path: Path, result: CosimResult, problem: Problem) -> Path:
    data = {
        "problem": problem.id,
        "dataset": problem.dataset,
        "latency_s": result.outcome.latency_s,
        "committed": [list(c) for c in result.outcome.committed],
        "drafted_tokens": result.drafted_tokens,
        "ingested_tokens": result.ingested_tokens,
        "kv_tokens": result.kv_tokens,
        "kvmu_commands": result.kvmu_commands,
        "vcd": str(result.vcd_path) if result.vcd_path else None,
    }
    path.write_text(json.dumps(data, indent=1))
    return path
