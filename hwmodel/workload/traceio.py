"""Read, validate and write reasoning traces (JSONL, docs/traces.md).

Line 1 is the header (``{"format": "hwmodel-reasoning-trace", "version": 1, "backtracking": ...}``); every
further non-blank line is one problem. Every refusal names the file, the line, the field and why, e.g.
``trace.jsonl:7: field 'attempts[2].verdict': expected 'accept' ...``. Unknown keys are refused, so a typo never
falls back to a default silently.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from hwmodel.io import errors_as
from hwmodel.io import iter_lines as read_lines
from hwmodel.workload.requests import MAX_REQUEST_TOKENS  # one bound on token counts (issue #31)
from hwmodel.workload.trace import (
    DEFAULT_MAX_BACKTRACKS,
    DEFAULT_PRM_THRESHOLD,
    DRAFT,
    TARGET,
    TRACE_FORMAT,
    TRACE_VERSION,
    VERDICTS,
    Attempt,
    Problem,
    Trace,
    TraceError,
    TraceHeader,
    TraceRuleError,
    replay_of,
)

_HEADER_KEYS = {
    "format",
    "version",
    "backtracking",
    "prm_threshold",
    "max_backtracks",
    "source",
    "dataset",
    "config",
    "meta",
}
_PROBLEM_KEYS = {"dataset", "id", "prompt_tokens", "correct", "attempts"}
_ATTEMPT_KEYS = {"step", "by", "tokens", "score", "verdict", "final"}


class _FieldError(Exception):
    def __init__(self, field: str, why: str) -> None:
        super().__init__(why)
        self.field, self.why = field, why


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _check_keys(obj: dict[str, Any], allowed: set[str], prefix: str) -> None:
    extra = sorted(set(obj) - allowed)
    if extra:
        raise _FieldError(prefix + extra[0], f"a known field (known: {', '.join(sorted(allowed))})")


def _require(obj: dict[str, Any], key: str, prefix: str) -> Any:
    if key not in obj:
        raise _FieldError(prefix + key, "this required field to be present")
    return obj[key]


def parse_header(obj: Any) -> TraceHeader:
    if not isinstance(obj, dict):
        raise _FieldError("", "a JSON object (the trace header)")
    if obj.get("format") != TRACE_FORMAT:
        raise _FieldError(
            "format", f"'{TRACE_FORMAT}' (the first line must be the trace header), got {obj.get('format')!r}"
        )
    if obj.get("version") != TRACE_VERSION:
        raise _FieldError(
            "version", f"{TRACE_VERSION} (the trace format version this hwmodel reads), got {obj.get('version')!r}"
        )
    _check_keys(obj, _HEADER_KEYS, "")
    bt = _require(obj, "backtracking", "")
    if not isinstance(bt, bool):
        raise _FieldError("backtracking", f"true or false, got {bt!r}")
    thr = obj.get("prm_threshold", DEFAULT_PRM_THRESHOLD)
    if not _is_num(thr) or not 0 < thr < 1:
        raise _FieldError("prm_threshold", f"a number in (0, 1), got {thr!r}")
    mb = obj.get("max_backtracks", DEFAULT_MAX_BACKTRACKS)
    if not _is_int(mb) or mb < 0:
        raise _FieldError("max_backtracks", f"an integer >= 0, got {mb!r}")
    for k in ("source", "dataset", "config"):
        if obj.get(k) is not None and not isinstance(obj[k], str):
            raise _FieldError(k, f"a string, got {obj[k]!r}")
    meta = obj.get("meta") or {}
    if not isinstance(meta, dict):
        raise _FieldError("meta", f"a JSON object, got {meta!r}")
    return TraceHeader(
        backtracking=bt,
        prm_threshold=float(thr),
        max_backtracks=mb,
        source=obj.get("source") or "",
        dataset=obj.get("dataset"),
        config=obj.get("config"),
        meta=meta,
    )


def _parse_attempt(obj: Any, prefix: str) -> Attempt:
    if not isinstance(obj, dict):
        raise _FieldError(prefix.rstrip("."), f"a JSON object (one attempt), got {obj!r}")
    _check_keys(obj, _ATTEMPT_KEYS, prefix)
    step = _require(obj, "step", prefix)
    if not _is_int(step) or step < 0:
        raise _FieldError(prefix + "step", f"an integer >= 0, got {step!r}")
    by = _require(obj, "by", prefix)
    if by not in (DRAFT, TARGET):
        raise _FieldError(prefix + "by", f"'draft' or 'target', got {by!r}")
    tokens = _require(obj, "tokens", prefix)
    if not _is_int(tokens) or tokens < 1:
        raise _FieldError(
            prefix + "tokens", f"an integer >= 1 (tokens of the step, delimiter included), got {tokens!r}"
        )
    if tokens > MAX_REQUEST_TOKENS:
        raise _FieldError(prefix + "tokens", f"at most {MAX_REQUEST_TOKENS:,} tokens, got {tokens!r}")
    score = obj.get("score")
    if score is not None and not _is_num(score):
        raise _FieldError(prefix + "score", f"a number in [0, 1] or null, got {score!r}")
    verdict = _require(obj, "verdict", prefix)
    if verdict not in VERDICTS:
        raise _FieldError(prefix + "verdict", f"one of {', '.join(repr(v) for v in VERDICTS)}, got {verdict!r}")
    final = obj.get("final", False)
    if not isinstance(final, bool):
        raise _FieldError(prefix + "final", f"true or false, got {final!r}")
    return Attempt(step, by, tokens, None if score is None else float(score), verdict, final)


def parse_problem(obj: Any, header: TraceHeader) -> Problem:
    """One problem record, checked field by field and then against the step rules (trace.replay)."""
    if not isinstance(obj, dict):
        raise _FieldError("", "a JSON object (one problem)")
    _check_keys(obj, _PROBLEM_KEYS, "")
    dataset = _require(obj, "dataset", "")
    if not isinstance(dataset, str) or not dataset:
        raise _FieldError("dataset", f"a non-empty string, got {dataset!r}")
    pid = _require(obj, "id", "")
    if not (isinstance(pid, str) and pid) and not _is_int(pid):
        raise _FieldError("id", f"a non-empty string or an integer, got {pid!r}")
    pt = _require(obj, "prompt_tokens", "")
    if not _is_int(pt) or pt < 1:
        raise _FieldError("prompt_tokens", f"an integer >= 1, got {pt!r}")
    if pt > MAX_REQUEST_TOKENS:
        raise _FieldError("prompt_tokens", f"at most {MAX_REQUEST_TOKENS:,} tokens, got {pt!r}")
    correct = _require(obj, "correct", "")
    if not isinstance(correct, bool):
        raise _FieldError("correct", f"true or false, got {correct!r}")
    raw = _require(obj, "attempts", "")
    if not isinstance(raw, list) or not raw:
        raise _FieldError("attempts", "a non-empty list of attempts")
    attempts = tuple(_parse_attempt(a, f"attempts[{i}].") for i, a in enumerate(raw))
    problem = Problem(dataset, str(pid), pt, correct, attempts)
    try:
        replay_of(problem, header)
    except TraceRuleError as exc:
        raise _FieldError(exc.field, exc.why) from None
    return problem


def _lines(path: Path) -> Iterator[str]:
    """The file's lines through the reading layer (gzip detected by its magic bytes, errors name the line)."""
    return (text for _n, text in read_lines(path, "trace file"))


def iter_lines(lines: Iterable[str], path: object = "<trace>") -> Iterator[TraceHeader | Problem]:
    """Parse trace lines lazily: the header first, then each problem (raises TraceError with the line number)."""
    header: TraceHeader | None = None
    seen: set[tuple[str, str]] = set()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(
                path, n, None, f"expected one JSON object per line ({exc.msg} at column {exc.colno})"
            ) from None
        try:
            if header is None:
                header = parse_header(obj)
                yield header
                continue
            problem = parse_problem(obj, header)
        except _FieldError as exc:
            raise TraceError(path, n, exc.field or None, "expected " + exc.why) from None
        key = (problem.dataset, problem.id)
        if key in seen:
            raise TraceError(
                path, n, "id", f"expected a unique id per dataset, {problem.id!r} of {problem.dataset!r} repeats"
            )
        seen.add(key)
        yield problem
    if header is None:
        raise TraceError(path, None, None, "expected a trace header line, the file is empty")
    if not seen:
        raise TraceError(
            path,
            None,
            None,
            "expected at least one problem line after the header (a trace with no problems has nothing to replay)",
        )


def read_trace(path: Path | str) -> Trace:
    """Read and validate a whole trace file (``.jsonl`` or ``.jsonl.gz``)."""
    path = Path(path)
    if not path.is_file():
        raise TraceError(path, None, None, "expected an existing trace file")
    with errors_as(TraceError):
        items = list(iter_lines(_lines(path), path))
    header = items[0]
    assert isinstance(header, TraceHeader)
    return Trace(header, tuple(p for p in items[1:] if isinstance(p, Problem)))


def parse_trace_text(text: str, path: object = "<trace>") -> Trace:
    items = list(iter_lines(text.splitlines(), path))
    header = items[0]
    assert isinstance(header, TraceHeader)
    return Trace(header, tuple(p for p in items[1:] if isinstance(p, Problem)))


def trace_lines(trace: Trace) -> Iterator[str]:
    yield json.dumps(trace.header.as_dict(), separators=(",", ":"))
    for p in trace.problems:
        yield json.dumps(p.as_dict(), separators=(",", ":"))


def write_trace(trace: Trace, path: Path | str) -> Path:
    """Write ``trace`` as JSONL (gzip when the name ends in .gz). Deterministic: same trace, same bytes."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(trace_lines(trace)) + "\n"
    if path.suffix == ".gz":
        with gzip.GzipFile(path, "wb", mtime=0) as fh:
            fh.write(text.encode("utf-8"))
    else:
        path.write_text(text, encoding="utf-8")
    return path
