"""Serving request streams (system B): who asks for how many tokens, and when.

A request is ``(arrival_s, prompt_tokens, output_tokens)``: it arrives at ``arrival_s`` seconds, its prompt has
``prompt_tokens`` tokens (prefilled in one pass) and it generates ``output_tokens`` tokens, the first from the
prefill's logits and the rest by ``output_tokens - 1`` decode steps (the vLLM / DistServe convention).

Streams come from a generator (Poisson arrivals at a given rate, or all at t = 0 for a saturation study; prompt and
output lengths fixed or drawn from a distribution, seeded) or from a file:

* CSV with a header naming the columns ``arrival_s``, ``prompt_tokens``, ``output_tokens`` and optionally ``id``;
* JSON lines (``.jsonl``), one object per request with the same keys.

Every stream is validated: lengths are positive integers of at most :data:`MAX_REQUEST_TOKENS`, arrivals are
finite, non-negative, non-decreasing and within :data:`MAX_ARRIVAL_S` (the horizon the simulators represent), ids
are unique; an optional context limit (the LLM's ``max_position``) bounds ``prompt + output``. A bad file fails
with one line naming the file, the line, the field and what was expected.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from hwmodel.errors import HwmodelError
from hwmodel.io import errors_as, iter_jsonl, read_text

COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")

MAX_ARRIVAL_S = float(2**22)
"""Latest arrival a stream may have: 2**22 s (about 48.5 days). The serving and reasoning simulators keep time as
float64 seconds; up to 2**22 s its spacing is 2**-30 s (0.93 ns), finer than the shortest latency they add (a
link's ~1 us), while at 1e300 s one ulp is ~1e284 s and every duration rounds to nothing."""

MAX_REQUEST_TOKENS = 2**24
"""Most prompt or output tokens one request may ask for (16,777,216): above the largest context window of any
published LLM (10M tokens), low enough that a typo fails instead of overflowing a token count."""


class RequestStreamError(HwmodelError):
    """A request stream (file or generator arguments) is malformed; the message says where and what."""

    def __init__(self, where: str, field: str | None, expected: str, got: object = ...) -> None:
        at = f"{where}: field '{field}'" if field else where
        got_txt = "" if got is ... else f", got {got!r}"
        super().__init__(f"{at}: expected {expected}{got_txt}")


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """One inference request. ``output_tokens`` counts every generated token, the first one included."""

    id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int

    @property
    def decode_steps(self) -> int:
        """Decode steps after the prefill (the prefill's logits give the first output token)."""
        return self.output_tokens - 1

    @property
    def final_ctx(self) -> int:
        """Tokens in the KV cache after the last decode step."""
        return self.prompt_tokens + self.output_tokens - 1


# ================================================================================================ length laws
class LengthDist(Protocol):
    """A law for token counts; ``spec`` is the string that parses back to it."""

    spec: str

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray: ...

    @property
    def max_tokens(self) -> int: ...


@dataclasses.dataclass(frozen=True)
class Fixed:
    tokens: int

    @property
    def spec(self) -> str:
        return f"fixed:{self.tokens}"

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return np.full(n, self.tokens, dtype=np.int64)

    @property
    def max_tokens(self) -> int:
        return self.tokens


@dataclasses.dataclass(frozen=True)
class Uniform:
    """Integers uniform in [lo, hi], both included."""

    lo: int
    hi: int

    @property
    def spec(self) -> str:
        return f"uniform:{self.lo}:{self.hi}"

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        return rng.integers(self.lo, self.hi + 1, size=n, dtype=np.int64)

    @property
    def max_tokens(self) -> int:
        return self.hi


@dataclasses.dataclass(frozen=True)
class LogNormal:
    """Log-normal with the given median and log-space sigma, rounded and clipped to [1, hi] (the heavy-tailed
    prompt/output lengths of chat traces such as ShareGPT are commonly fitted this way)."""

    median: float
    sigma: float
    hi: int

    @property
    def spec(self) -> str:
        return f"lognormal:{self.median:g}:{self.sigma:g}:{self.hi}"

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        x = rng.lognormal(mean=math.log(self.median), sigma=self.sigma, size=n)
        return np.clip(np.rint(x), 1, self.hi).astype(np.int64)

    @property
    def max_tokens(self) -> int:
        return self.hi


LENGTH_FORMS = "N, fixed:N, uniform:LO:HI or lognormal:MEDIAN:SIGMA:MAX"


def parse_length(text: str, what: str = "length") -> LengthDist:
    """Parse a length law: ``1536``, ``fixed:1536``, ``uniform:128:2048``, ``lognormal:1024:0.6:4096``."""
    where = f"{what} '{text}'"
    parts = text.strip().split(":")
    kind, args = ("fixed", parts) if len(parts) == 1 else (parts[0].lower(), parts[1:])

    def pos_int(s: str, name: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise RequestStreamError(where, name, "a positive integer", s) from None
        if not 1 <= v <= MAX_REQUEST_TOKENS:
            raise RequestStreamError(where, name, _tokens(v), v)
        return v

    def pos_float(s: str, name: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise RequestStreamError(where, name, "a positive number", s) from None
        if not (math.isfinite(v) and v > 0):
            raise RequestStreamError(where, name, "a positive number", v)
        return v

    if kind == "fixed" and len(args) == 1:
        return Fixed(pos_int(args[0], "N"))
    if kind == "uniform" and len(args) == 2:
        lo, hi = pos_int(args[0], "LO"), pos_int(args[1], "HI")
        if hi < lo:
            raise RequestStreamError(where, "HI", f"at least LO ({lo})", hi)
        return Uniform(lo, hi)
    if kind == "lognormal" and len(args) == 3:
        return LogNormal(pos_float(args[0], "MEDIAN"), pos_float(args[1], "SIGMA"), pos_int(args[2], "MAX"))
    raise RequestStreamError(where, None, f"one of {LENGTH_FORMS}")


# ================================================================================================ generation
def poisson_stream(
    n: int, rate_per_s: float, prompt: LengthDist, output: LengthDist, seed: int, start_s: float = 0.0
) -> tuple[Request, ...]:
    """``n`` requests with exponential inter-arrival gaps of mean ``1 / rate_per_s`` (a Poisson process), the first
    one at ``start_s``; ``rate_per_s = inf`` puts every arrival at ``start_s`` (a saturation study). Lengths are
    drawn from ``prompt`` and ``output`` with one seeded generator, so the same arguments give the same stream."""
    if n < 1:
        raise RequestStreamError("request stream", "n", "a positive number of requests", n)
    if not (rate_per_s > 0) or math.isnan(rate_per_s):
        raise RequestStreamError("request stream", "rate_per_s", "a positive rate (requests/s) or inf", rate_per_s)
    rng = np.random.default_rng(seed)
    if math.isinf(rate_per_s):
        arrivals = np.full(n, start_s)
    else:
        gaps = rng.exponential(1.0 / rate_per_s, size=n)
        gaps[0] = 0.0
        arrivals = start_s + np.cumsum(gaps)
        if arrivals[-1] > MAX_ARRIVAL_S:
            raise RequestStreamError(
                "request stream",
                "rate_per_s",
                f"a rate at which {n:,} arrivals fit the simulated horizon of {MAX_ARRIVAL_S:,.0f} s",
                rate_per_s,
            )
    prompts = prompt.sample(rng, n)
    outputs = output.sample(rng, n)
    return tuple(map(Request, range(n), arrivals.tolist(), np.asarray(prompts).tolist(), np.asarray(outputs).tolist()))


# ================================================================================================ validation
_HORIZON = f"an arrival within the simulated horizon of {MAX_ARRIVAL_S:,.0f} s (about 48.5 days; MAX_ARRIVAL_S)"


def _tokens(v: object) -> str:
    big = isinstance(v, int) and not isinstance(v, bool) and v > MAX_REQUEST_TOKENS
    return f"at most {MAX_REQUEST_TOKENS:,} tokens (MAX_REQUEST_TOKENS)" if big else "a positive integer"


def validate(
    requests: Sequence[Request],
    *,
    where: str = "request stream",
    max_context_tokens: int | None = None,
    row_label: Callable[[int], str] | None = None,
) -> tuple[Request, ...]:
    """Check a stream; returns it as a tuple. Errors name the request (by position, or ``row_label(i)``, e.g. the
    file line) and the field."""
    first_use: dict[int, int] = {}
    last = -math.inf
    for i, r in enumerate(requests):
        at = f"{where}: {row_label(i) if row_label else f'request {i}'} (id {r.id})"
        if (
            isinstance(r.arrival_s, bool)
            or not isinstance(r.arrival_s, (int, float))
            or not math.isfinite(r.arrival_s)
            or r.arrival_s < 0
        ):
            raise RequestStreamError(at, "arrival_s", "a finite number of seconds >= 0", r.arrival_s)
        if r.arrival_s > MAX_ARRIVAL_S:
            raise RequestStreamError(at, "arrival_s", _HORIZON, r.arrival_s)
        if r.arrival_s < last:
            raise RequestStreamError(
                at, "arrival_s", f"arrivals in non-decreasing order (previous {last:g})", r.arrival_s
            )
        last = r.arrival_s
        for name in ("prompt_tokens", "output_tokens"):
            v = getattr(r, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_REQUEST_TOKENS:
                raise RequestStreamError(at, name, _tokens(v), v)
        if r.id in first_use:
            raise RequestStreamError(at, "id", f"an id not already used by request {first_use[r.id]}", r.id)
        first_use[r.id] = i
        if max_context_tokens is not None and r.prompt_tokens + r.output_tokens > max_context_tokens:
            raise RequestStreamError(
                at,
                "prompt_tokens",
                f"prompt + output <= {max_context_tokens} (the model's context limit)",
                r.prompt_tokens + r.output_tokens,
            )
    if not requests:
        raise RequestStreamError(where, None, "at least one request")
    return tuple(requests)


def _parse_row(row: dict[str, Any], where: str, index: int) -> Request:
    def get_int(name: str) -> int:
        raw = row.get(name)
        if raw is None or raw == "":
            raise RequestStreamError(where, name, "a value (column missing or empty)")
        if isinstance(raw, bool):
            raise RequestStreamError(where, name, "a positive integer", raw)
        if isinstance(raw, float) and raw.is_integer():
            raw = int(raw)
        try:
            v = int(raw) if isinstance(raw, (int, str)) else None
        except ValueError:
            v = None
        if v is None or not 1 <= v <= MAX_REQUEST_TOKENS:
            raise RequestStreamError(where, name, _tokens(v), raw)
        return v

    raw_t = row.get("arrival_s")
    if raw_t is None or raw_t == "" or isinstance(raw_t, bool):
        raise RequestStreamError(where, "arrival_s", "a number of seconds", raw_t)
    try:
        t = float(raw_t)
    except (TypeError, ValueError):
        raise RequestStreamError(where, "arrival_s", "a number of seconds", raw_t) from None
    if not math.isfinite(t) or t < 0:
        raise RequestStreamError(where, "arrival_s", "a finite number of seconds >= 0", raw_t)
    if t > MAX_ARRIVAL_S:
        raise RequestStreamError(where, "arrival_s", _HORIZON, raw_t)
    rid = _get_id(row, index, where)
    return Request(rid, t, get_int("prompt_tokens"), get_int("output_tokens"))


def _get_id(row: dict[str, Any], default: int, where: str) -> int:
    """The optional ``id`` column; the request's position when absent."""
    raw = row.get("id")
    if raw is None or raw == "":
        return default
    try:
        v = int(raw)
    except (TypeError, ValueError):
        raise RequestStreamError(where, "id", "an integer >= 0", raw) from None
    if isinstance(raw, bool) or (isinstance(raw, float) and not raw.is_integer()) or v < 0:
        raise RequestStreamError(where, "id", "an integer >= 0", raw)
    return v


def load_requests(path: Path | str, *, max_context_tokens: int | None = None) -> tuple[Request, ...]:
    """Read a CSV or JSONL request file (see the module docstring) and validate it."""
    path = Path(path)
    if not path.is_file():
        raise RequestStreamError(str(path), None, "an existing request file (.csv or .jsonl)")
    rows: list[Request] = []
    line_of: list[int] = []  # file line of each request, for error messages
    with errors_as(RequestStreamError):
        suffix = Path(path.name.lower().removesuffix(".gz")).suffix  # compression is detected from the bytes
        if suffix in (".jsonl", ".ndjson"):
            for lineno, obj in iter_jsonl(path, "request stream"):
                where = f"{path}:{lineno}"
                if not isinstance(obj, dict):
                    raise RequestStreamError(where, None, "a JSON object", obj)
                unknown = sorted(set(obj) - {*COLUMNS, "id"})
                if unknown:
                    raise RequestStreamError(where, unknown[0], "one of the keys " + ", ".join((*COLUMNS, "id")))
                rows.append(_parse_row(obj, where, len(rows)))
                line_of.append(lineno)
        elif suffix == ".csv":
            with io.StringIO(read_text(path, "request stream"), newline="") as fh:
                reader = csv.DictReader(fh)
                try:
                    fieldnames = reader.fieldnames or []
                except csv.Error as exc:
                    raise RequestStreamError(f"{path}:1", None, "well-formed CSV", str(exc)) from None
                header = [h.strip() for h in fieldnames]
                missing = [c for c in COLUMNS if c not in header]
                if missing:
                    raise RequestStreamError(
                        f"{path}:1",
                        None,
                        "a header row naming the columns " + ", ".join(COLUMNS) + " (and optionally id)",
                        ",".join(header),
                    )
                unknown = sorted(set(header) - {*COLUMNS, "id"})
                if unknown:
                    raise RequestStreamError(
                        f"{path}:1", unknown[0], "one of the columns " + ", ".join((*COLUMNS, "id"))
                    )
                reader.fieldnames = header
                try:
                    for row in reader:
                        where = f"{path}:{reader.line_num}"
                        if None in row:
                            raise RequestStreamError(
                                where, None, f"{len(header)} comma-separated values (more were given)"
                            )
                        rows.append(
                            _parse_row(
                                {k: (v.strip() if isinstance(v, str) else v) for k, v in row.items()}, where, len(rows)
                            )
                        )
                        line_of.append(reader.line_num)
                except csv.Error as exc:
                    raise RequestStreamError(f"{path}:{reader.line_num}", None, "well-formed CSV", str(exc)) from None
        else:
            raise RequestStreamError(str(path), None, "a .csv or .jsonl file", path.suffix)
    return validate(
        rows, where=str(path), max_context_tokens=max_context_tokens, row_label=lambda i: f"line {line_of[i]}"
    )


def write_requests(path: Path | str, requests: Iterable[Request]) -> Path:
    """Write a stream as CSV (``.csv``) or JSON lines (``.jsonl``); ``load_requests`` reads it back identically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() in (".jsonl", ".ndjson"):
        with open(path, "w", encoding="utf-8") as fh:
            for r in requests:
                fh.write(
                    json.dumps(
                        {
                            "id": r.id,
                            "arrival_s": r.arrival_s,
                            "prompt_tokens": r.prompt_tokens,
                            "output_tokens": r.output_tokens,
                        }
                    )
                    + "\n"
                )
    elif path.suffix.lower() == ".csv":
        from hwmodel.report.tables import write_csv

        rows = ((r.id, repr(r.arrival_s), r.prompt_tokens, r.output_tokens) for r in requests)
        write_csv(path, rows, ("id", *COLUMNS), line_end="\r\n", cells="plain")  # CRLF, as request files always were
    else:
        raise RequestStreamError(str(path), None, "a .csv or .jsonl output file", path.suffix)
    return path


def summary(requests: Sequence[Request]) -> dict[str, float]:
    """Size, span, offered rate and length statistics of a stream."""
    arr = np.array([r.arrival_s for r in requests])
    p = np.array([r.prompt_tokens for r in requests])
    o = np.array([r.output_tokens for r in requests])
    span = float(arr[-1] - arr[0]) if len(arr) > 1 else 0.0
    return {
        "requests": len(requests),
        "span_s": span,
        "offered_rate_per_s": (len(arr) - 1) / span if span > 0 else math.inf,
        "prompt_tokens_mean": float(p.mean()),
        "prompt_tokens_max": int(p.max()),
        "output_tokens_mean": float(o.mean()),
        "output_tokens_max": int(o.max()),
        "total_output_tokens": int(o.sum()),
    }
