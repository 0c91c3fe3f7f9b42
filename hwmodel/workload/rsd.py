"""Import the reference RSD implementation's per-sample logs into a trace (github.com/BaohaoLiao/RSD,
``main_online.py`` with ``--save_outputs``; workload.md s1.3).

One JSON object per line, per problem: ``token_counts = [draft tokens accepted, target tokens, draft tokens
discarded]`` (each model's tokenizer, delimiters included), ``turn_info = [[step_idx, 1 | 2], ...]`` (1: the draft's
step was accepted; 2: it was rejected and the target wrote the step) and ``reward`` (the draft step's PRM score,
one per step, rejected steps included). ``idx`` identifies the problem and ``score`` (a list of booleans, as the
Qwen2.5-Math evaluation harness writes it) its correctness.

RSD logs only token *totals* per model, not per step: the importer splits each total evenly over the steps it
covers (the remainder going to the earliest steps), which keeps every total exact. RSD does not re-score the
target's steps and does not backtrack, so an imported trace has ``backtracking = false``. Prompt lengths are not
logged: they come from the shipped prompt data by (dataset, idx), or from ``prompt_tokens`` in the row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hwmodel.io import errors_as, iter_jsonl
from hwmodel.workload.datasets import DATASETS, load_prompts
from hwmodel.workload.trace import (
    ACCEPT,
    DEFAULT_PRM_THRESHOLD,
    DRAFT,
    REJECT,
    TARGET,
    Attempt,
    Problem,
    Trace,
    TraceError,
    TraceHeader,
    TraceRuleError,
    replay,
)


def _split(total: int, parts: int) -> list[int]:
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def _field(row: dict[str, Any], key: str, path: object, line: int) -> Any:
    if key not in row:
        raise TraceError(path, line, key, "expected this field of an RSD per-sample log row")
    return row[key]


def import_rsd_row(
    row: Any,
    dataset: str,
    path: object,
    line: int,
    prm_threshold: float = DEFAULT_PRM_THRESHOLD,
    prompt_tokens: dict[int, int] | None = None,
) -> Problem:
    """One RSD log row -> one trace problem (module docstring)."""
    if not isinstance(row, dict):
        raise TraceError(path, line, None, "expected one JSON object per line (an RSD per-sample log row)")
    counts = _field(row, "token_counts", path, line)
    if (
        not isinstance(counts, list)
        or len(counts) != 3
        or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in counts)
    ):
        raise TraceError(
            path,
            line,
            "token_counts",
            f"expected [draft accepted, target, draft discarded] as three integers >= 0, got {counts!r}",
        )
    turns = _field(row, "turn_info", path, line)
    if not isinstance(turns, list) or not turns:
        raise TraceError(path, line, "turn_info", "expected a non-empty list of [step_idx, 1 or 2]")
    kinds: list[int] = []
    for i, t in enumerate(turns):
        if not isinstance(t, list) or len(t) != 2 or t[1] not in (1, 2) or t[0] != i:
            raise TraceError(
                path,
                line,
                f"turn_info[{i}]",
                f"expected [{i}, 1 or 2] (steps in order; 1 = draft accepted, 2 = target), got {t!r}",
            )
        kinds.append(t[1])
    rewards = _field(row, "reward", path, line)
    if not isinstance(rewards, list) or len(rewards) != len(kinds):
        raise TraceError(
            path,
            line,
            "reward",
            f"expected one PRM score per step ({len(kinds)}), got "
            f"{len(rewards) if isinstance(rewards, list) else rewards!r}",
        )
    n_acc, n_tgt = kinds.count(1), kinds.count(2)
    d_acc, t_tok, d_disc = counts
    for name, total, steps in (
        ("draft tokens accepted", d_acc, n_acc),
        ("target tokens", t_tok, n_tgt),
        ("draft tokens discarded", d_disc, n_tgt),
    ):
        if steps and total < steps:
            raise TraceError(
                path,
                line,
                "token_counts",
                f"expected at least one token per step: {name} = {total} over {steps} step(s)",
            )
        if not steps and total:
            raise TraceError(path, line, "token_counts", f"expected {name} = 0 with no such step, got {total}")
    acc_it = iter(_split(d_acc, n_acc) if n_acc else [])
    tgt_it = iter(_split(t_tok, n_tgt) if n_tgt else [])
    disc_it = iter(_split(d_disc, n_tgt) if n_tgt else [])
    attempts: list[Attempt] = []
    last = len(kinds) - 1
    for k, (kind, r) in enumerate(zip(kinds, rewards)):
        if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 <= r <= 1.0:
            raise TraceError(path, line, f"reward[{k}]", f"expected a PRM score in [0, 1], got {r!r}")
        if (kind == 1) != (r >= prm_threshold):
            why = "reaches" if r >= prm_threshold else "is below"
            raise TraceError(
                path,
                line,
                f"turn_info[{k}]",
                f"expected {1 if r >= prm_threshold else 2}: reward {r} {why} the PRM threshold {prm_threshold}",
            )
        if kind == 1:
            attempts.append(Attempt(k, DRAFT, next(acc_it), float(r), ACCEPT, k == last))
        else:
            attempts.append(Attempt(k, DRAFT, next(disc_it), float(r), REJECT, k == last))
            attempts.append(Attempt(k, TARGET, next(tgt_it), None, ACCEPT, k == last))
    idx = row.get("idx", line)
    if not ((isinstance(idx, int) and not isinstance(idx, bool) and idx >= 0) or (isinstance(idx, str) and idx)):
        raise TraceError(
            path, line, "idx", f"expected the problem index (an integer >= 0 or a non-empty string), got {idx!r}"
        )
    if "prompt_tokens" in row:
        pt = row["prompt_tokens"]
    elif prompt_tokens is not None and isinstance(idx, int) and idx in prompt_tokens:
        pt = prompt_tokens[idx]
    else:
        raise TraceError(
            path,
            line,
            "idx",
            f"expected the index of a {dataset} problem in the shipped prompt data, "
            f"or a 'prompt_tokens' field in the row, got idx {idx!r}",
        )
    if not isinstance(pt, int) or isinstance(pt, bool) or pt < 1:
        raise TraceError(path, line, "prompt_tokens", f"expected an integer >= 1, got {pt!r}")
    score = row.get("score", [False])
    first = score[0] if isinstance(score, list) and score else score
    if not isinstance(first, bool):  # "False" (a string) is truthy: never guess a correctness
        raise TraceError(
            path,
            line,
            "score",
            f"expected true/false or a non-empty list of true/false (the "
            f"evaluation harness's per-sample correctness), got {score!r}",
        )
    correct = first
    problem = Problem(dataset, str(idx), pt, correct, tuple(attempts))
    try:
        replay(problem, backtracking=False, prm_threshold=prm_threshold)
    except TraceRuleError as exc:  # pragma: no cover - the construction above always obeys the rules
        raise TraceError(path, line, exc.field, "expected " + exc.why) from None
    return problem


def import_rsd(
    path: Path | str, dataset: str, prm_threshold: float = DEFAULT_PRM_THRESHOLD, config: str | None = None
) -> Trace:
    """Read an RSD per-sample log (``*.jsonl``) of ``dataset`` into a trace without backtracking."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(path, None, None, "expected an existing RSD log file")
    lookup = {p.idx: p.prompt_tokens for p in load_prompts(dataset)} if dataset in DATASETS else None
    problems: list[Problem] = []
    first_line: dict[str, int] = {}
    with errors_as(TraceError):
        for n, row in iter_jsonl(path, "RSD per-sample log"):
            problem = import_rsd_row(row, dataset, path, n, prm_threshold, lookup)
            if problem.id in first_line:
                raise TraceError(
                    path,
                    n,
                    "idx",
                    f"expected a unique problem index, {problem.id!r} already on line {first_line[problem.id]}",
                )
            first_line[problem.id] = n
            problems.append(problem)
    if not problems:
        raise TraceError(path, None, None, "expected at least one RSD log row, the file is empty")
    header = TraceHeader(
        backtracking=False,
        prm_threshold=prm_threshold,
        source="rsd-log",
        dataset=dataset,
        config=config,
        meta={"imported_from": path.name, "note": "per-step tokens split evenly from RSD's per-model totals"},
    )
    return Trace(header, tuple(problems))
