"""The real reasoning data shipped with hwmodel (hwmodel/workload/data, see PROVENANCE.md there).

* per benchmark problem: prompt tokens (Qwen2.5-Math CoT chat prompt) and, where the source has them, the gold
  solution's length and the MATH level;
* 800 real Qwen2.5-Math-Instruct chain-of-thought answers to 100 MATH problems, split into steps at ``"\\n\\n"``
  with per-step token counts.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

from hwmodel.errors import UnknownNameError

DATA_DIR = Path(__file__).resolve().parent / "data"
DATASETS = ("math500", "gsm8k", "gaokao2023en", "olympiadbench")
DATASET_TITLES = {
    "math500": "MATH500",
    "gsm8k": "GSM8K",
    "gaokao2023en": "Gaokao2023EN",
    "olympiadbench": "OlympiadBench",
}


@dataclasses.dataclass(frozen=True, slots=True)
class PromptInfo:
    """One benchmark problem: what the data says about it."""

    idx: int
    prompt_tokens: int
    reference_solution_tokens: int | None
    level: int | None
    subject: str | None


@dataclasses.dataclass(frozen=True, slots=True)
class RealAnswer:
    """One real model answer: step lengths in tokens (delimiter included), its MATH level and correctness."""

    problem: int
    sample: int
    level: int
    prompt_tokens: int
    step_tokens: tuple[int, ...]
    correct: bool

    @property
    def total_tokens(self) -> int:
        return sum(self.step_tokens)


def _read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@functools.cache
def load_prompts(dataset: str) -> tuple[PromptInfo, ...]:
    """Per-problem prompt data of a benchmark (MATH500, GSM8K, Gaokao2023EN, OlympiadBench)."""
    if dataset not in DATASETS:
        raise UnknownNameError("dataset", dataset, list(DATASETS))
    rows = _read_jsonl(DATA_DIR / f"{dataset}_prompts.jsonl")
    return tuple(
        PromptInfo(
            int(r["idx"]), int(r["prompt_tokens"]), r.get("reference_solution_tokens"), r.get("level"), r.get("subject")
        )
        for r in rows
    )


@functools.cache
def load_real_answers() -> tuple[RealAnswer, ...]:
    """The 800 real Qwen2.5-Math-Instruct answers (100 MATH problems x 8 samples)."""
    rows = _read_jsonl(DATA_DIR / "math_cot_100_steps.jsonl")
    return tuple(
        RealAnswer(
            int(r["problem"]),
            int(r["sample"]),
            int(str(r["level"]).split()[-1]),
            int(r["prompt_tokens"]),
            tuple(int(t) for t in r["step_tokens"]),
            bool(r["correct"]),
        )
        for r in rows
    )
