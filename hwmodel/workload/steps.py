"""Step-length structure of the generated traces, fitted to the real data (docs/traces.md, "Step lengths").

Every generated problem takes the step list of one of the 800 real Qwen2.5-Math-Instruct answers and scales its
step lengths to the problem. The scale comes from one relation fitted on the data:

    expected answer tokens = A * (gold-solution tokens) ** beta

fitted by least squares in log-log space on the five MATH levels: the mean gold-solution length of the MATH500
problems of a level against the mean length of the real answers of that level. (Across levels the answers grow
by longer steps, not by many more steps: workload.md s2.2; so the step count stays that of the real answer.)
Problems without a gold solution (Gaokao2023EN) take a MATH level drawn from MATH500's level mix.

Regenerating a step (the target's refinement of a rejected step, or a re-drafted step) changes its length by a
log-normal factor whose spread is measured on the data: the 8 answers of the same problem that have the same
number of steps give, step by step, the spread of two generations of "the same" step.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import defaultdict

import numpy as np

from hwmodel.workload.datasets import load_prompts, load_real_answers

MAX_CONTEXT_TOKENS = 4096  # RSD scripts/math_eval.sh --max_tokens_per_call 4096: cap on prompt + answer tokens


@dataclasses.dataclass(frozen=True)
class LengthModel:
    """Fitted step-length relations (all from the shipped data; see the module docstring)."""

    beta: float  # elasticity of answer length to gold-solution length
    scale_a: float  # A in the relation above (tokens)
    level_ref_tokens: tuple[float, ...]  # mean MATH500 gold-solution tokens per level 1..5
    level_answer_tokens: tuple[float, ...]  # mean real-answer tokens per level 1..5
    level_weights: tuple[float, ...]  # MATH500 share of problems per level 1..5
    regen_sigma: float  # log-normal spread of a regenerated step's length
    answers_by_level: tuple[tuple[int, ...], ...]  # indices of the real answers per level 1..5

    def expected_answer_tokens(self, ref_tokens: float) -> float:
        return self.scale_a * ref_tokens**self.beta

    def level_expected_tokens(self, level: int) -> float:
        """The fitted expected answer length of a MATH level (what a real answer of that level is scaled from)."""
        return self.expected_answer_tokens(self.level_ref_tokens[level - 1])

    def as_dict(self) -> dict[str, object]:
        return {
            "beta": round(self.beta, 6),
            "scale_a": round(self.scale_a, 6),
            "level_ref_tokens": [round(x, 3) for x in self.level_ref_tokens],
            "level_answer_tokens": [round(x, 3) for x in self.level_answer_tokens],
            "regen_sigma": round(self.regen_sigma, 6),
        }


@functools.cache
def fit_length_model() -> LengthModel:
    """Fit :class:`LengthModel` on the shipped data (deterministic; cached)."""
    answers = load_real_answers()
    math500 = load_prompts("math500")
    levels = range(1, 6)
    ref = [float(np.mean([p.reference_solution_tokens for p in math500 if p.level == lv])) for lv in levels]
    ans = [float(np.mean([a.total_tokens for a in answers if a.level == lv])) for lv in levels]
    beta, log_a = np.polyfit(np.log(ref), np.log(ans), 1)
    weights = [sum(p.level == lv for p in math500) / len(math500) for lv in levels]
    by_level = tuple(tuple(i for i, a in enumerate(answers) if a.level == lv) for lv in levels)
    return LengthModel(
        float(beta), float(math.exp(log_a)), tuple(ref), tuple(ans), tuple(weights), _regen_sigma(), by_level
    )


def _regen_sigma() -> float:
    """Spread (std of log tokens) between answers of one problem with the same step count, step by step."""
    groups: dict[tuple[int, int], list[tuple[int, ...]]] = defaultdict(list)
    for a in load_real_answers():
        groups[(a.problem, len(a.step_tokens))].append(a.step_tokens)
    devs: list[np.ndarray] = []
    for lists in groups.values():
        if len(lists) < 2:
            continue
        logs = np.log(np.asarray(lists, dtype=float))
        # unbiased: scale the deviations from the group mean by sqrt(n / (n - 1))
        devs.append(((logs - logs.mean(axis=0)) * math.sqrt(len(lists) / (len(lists) - 1))).ravel())
    return float(np.concatenate(devs).std())


def regenerated_tokens(planned: int, z: float, sigma: float) -> int:
    """Length of a regeneration of a step planned at ``planned`` tokens, for a standard-normal draw ``z``."""
    return max(2, int(round(planned * math.exp(sigma * z))))
