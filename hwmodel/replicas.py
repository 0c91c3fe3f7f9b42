"""Replicas of a stochastic run: the same settings under ``N`` seeds, each metric as a mean with a confidence
interval.

The interval is Student's t on the per-seed values (``mean +- t_{(1+c)/2, n-1} * s / sqrt(n)``): the seeds are
independent replications, and the t interval is exact for normal per-seed means and a good approximation for the
sums of many requests or problems a metric is. Percentile metrics (TTFT p90, ...) are estimated the same way: the
mean over seeds of each seed's percentile, with its t interval -- *not* a percentile over all seeds' requests pooled.

Used by the serving replicas (:mod:`hwmodel.serving.replicas`), the system-A replicas
(:mod:`hwmodel.reasoning.replicas`), the API (``seeds=N``) and the CLI (``--seeds N``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hwmodel.errors import HwmodelError

CONFIDENCE = 0.95


@dataclasses.dataclass(frozen=True)
class Interval:
    """A metric over seeds: its mean and the confidence interval of the mean (``low``/``high`` NaN for one seed)."""

    mean: float
    low: float
    high: float
    std: float
    n: int
    confidence: float = CONFIDENCE

    def to_dict(self) -> dict[str, float]:
        return dataclasses.asdict(self)

    def __str__(self) -> str:
        if self.n < 2:
            return f"{self.mean:.4g} (1 seed)"
        return f"{self.mean:.4g} [{self.low:.4g}, {self.high:.4g}]"


def t_interval(values: Sequence[float], confidence: float = CONFIDENCE) -> Interval:
    """Mean and Student-t confidence interval of ``values`` (one per seed)."""
    xs = [float(v) for v in values]
    n = len(xs)
    if n == 0:
        raise HwmodelError("a confidence interval needs at least one seed")
    mean = math.fsum(xs) / n
    if n == 1:
        return Interval(mean, math.nan, math.nan, math.nan, 1, confidence)
    std = math.sqrt(math.fsum((x - mean) ** 2 for x in xs) / (n - 1))
    from scipy.stats import t

    half = float(t.ppf(0.5 + confidence / 2, n - 1)) * std / math.sqrt(n)
    return Interval(mean, mean - half, mean + half, std, n, confidence)


def flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric leaves of a nested dict as ``a.b`` keys (booleans, strings and lists left out)."""
    out: dict[str, float] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out.update(flatten(v, key + "."))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key] = float(v)
    return out


@dataclasses.dataclass(frozen=True)
class Replicas:
    """One setting run under several seeds: ``summary[metric]`` is an :class:`Interval`."""

    what: str
    seeds: tuple[int, ...]
    runs: tuple[Any, ...]
    per_seed: tuple[dict[str, float], ...]
    summary: dict[str, Interval]

    @classmethod
    def of(
        cls,
        what: str,
        seeds: Iterable[int],
        runs: Iterable[Any],
        per_seed: Iterable[Mapping[str, Any]],
        confidence: float = CONFIDENCE,
    ) -> Replicas:
        flat = tuple(flatten(m) for m in per_seed)
        keys = [k for k in flat[0] if all(k in f and math.isfinite(f[k]) for f in flat)] if flat else []
        summary = {k: t_interval([f[k] for f in flat], confidence) for k in keys}
        return cls(what, tuple(seeds), tuple(runs), flat, summary)

    @property
    def n(self) -> int:
        return len(self.seeds)

    @property
    def confidence(self) -> float:
        return next(iter(self.summary.values())).confidence if self.summary else CONFIDENCE

    def __getitem__(self, metric: str) -> Interval:
        try:
            return self.summary[metric]
        except KeyError:
            raise HwmodelError(f"no metric {metric!r} over the seeds; have {', '.join(self.summary)}") from None

    def records(self) -> list[dict[str, float]]:
        """One flat dict per seed (``seed`` and every metric)."""
        return [{"seed": s, **m} for s, m in zip(self.seeds, self.per_seed, strict=True)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "what": self.what,
            "seeds": list(self.seeds),
            "n_seeds": self.n,
            "confidence": self.confidence,
            "metrics": {k: v.to_dict() for k, v in self.summary.items()},
        }

    def markdown(self, metrics: Sequence[str]) -> str:
        """A Markdown table of ``metrics``: mean and interval, and how many seeds."""
        title = (
            f"{self.what}: mean and {round(100 * self.confidence)} % confidence interval (Student t) over "
            f"{self.n} seeds ({self.seeds[0]}..{self.seeds[-1]})"
        )
        lines = [title, "", "| metric | mean | interval | std over seeds |", "|---|---|---|---|"]
        for m in metrics:
            iv = self[m]
            lines.append(f"| {m} | {iv.mean:.4g} | [{iv.low:.4g}, {iv.high:.4g}] | {iv.std:.3g} |")
        return "\n".join(lines)

    def plot(self, path: str | Path, metrics: Sequence[str], title: str | None = None) -> Path:
        """A bar per metric with its interval as an error bar (one panel per metric: units differ)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, len(metrics), figsize=(2.6 * len(metrics), 3.0), squeeze=False)
        for ax, m in zip(axes[0], metrics, strict=True):
            iv = self[m]
            err = [[iv.mean - iv.low], [iv.high - iv.mean]] if iv.n > 1 else None
            ax.bar([0], [iv.mean], yerr=err, capsize=6, color="#4c72b0")
            ax.set_xticks([])
            ax.set_title(m, fontsize=9)
        fig.suptitle(title or f"{self.what} ({self.n} seeds, {round(100 * self.confidence)} % CI)", fontsize=9)
        fig.tight_layout()
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(out, dpi=110)
        plt.close(fig)
        return out


def seed_list(first: int, n: int) -> tuple[int, ...]:
    """``n`` consecutive seeds from ``first``."""
    if n < 1:
        raise HwmodelError(f"seeds must be >= 1, got {n}")
    return tuple(range(first, first + n))
