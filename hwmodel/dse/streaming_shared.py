"""What the points of a ``streaming-decode`` sweep share, computed once per worker and reused.

A point's metrics split into a part that does not depend on the kernel clock and a part that does:

* **per design** (every parameter but ``clock_mhz``): the design itself, its resource estimate and utilisation,
  the timing heuristic's reachable clock and SLR span, the HBM port and capacity fractions (computed when the
  sweep is planned, for its screen: workers forked after planning inherit them);
* **per design and context, whatever the clock policy and timing heuristic**: the HBM-capacity check, the token
  program (compiled once: the lowering does not read the clock, only the channel timing seen from the kernel
  does; from the per-design design and resource estimate above) and the clock-independent parts of the result
  (which ports share a channel, the bytes of their requests, the peak bandwidth of the channels used);
* **per point**: the clock it runs at, the HBM parameter vector at that clock, one fast-engine run
  (:func:`fpga.streaming.engine.run_kernel`) and the few sums and ratios the metrics need from its output (cycles,
  busy cycles per engine for the power model, bytes the channels moved).

The per-design facts are memoized by the parameters that make them (a grid varies ``clock_mhz`` fastest, so a
chunk's consecutive points share them). A design whose facts fail (a structural error, a program that cannot be
compiled) fails the same way at every clock, so the error is memoized too. The metrics are the same floats, bit
for bit, as :func:`hwmodel.dse.streaming_eval.evaluate_reference`, which builds every point from scratch through
:func:`fpga.streaming.engine.run_program` (tests/test_dse_shared.py compares a sweep's rows from both paths).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar

from fpga.streaming.design import StreamingDesign
from hwmodel.dse.space import Params
from hwmodel.errors import HwmodelError
from hwmodel.specs import BoardSpec

CLOCK_PARAM = "clock_mhz"
T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class DesignFacts:
    """Everything of a point that does not depend on its kernel clock (see the module docstring)."""

    design: StreamingDesign  # at a unit clock (a point's run clock replaces it)
    board: BoardSpec
    use: Any  # fpga.streaming.resources.ResourceUse (clock-independent; the power model reuses it)
    fits_hbm: float
    program: Any  # fpga.streaming.program_format.Program
    refresh_phase_cycles: int
    engine_names: tuple[str, ...]
    class_of_lone_port: tuple[int, ...]  # per port on an unshared channel: its class's channel state
    shared_port_bytes: tuple[int, int]  # (read, write) bytes of the requests of the ports that share a channel
    peak_bw_bytes_per_s: float
    ports_peak_bw_bytes_per_s: float


class _PowerView(NamedTuple):
    """The fields of a :class:`fpga.streaming.engine.TokenResult` the power model reads."""

    cycles: int
    engine_cycles: Mapping[str, Mapping[str, int]]
    achieved_bw_bytes_per_s: float


def design_key(p: Params, ignore: frozenset[str] = frozenset({CLOCK_PARAM})) -> tuple[tuple[str, Any], ...]:
    """The parameters a memoized fact depends on: all but those in ``ignore``, in a canonical order."""
    return tuple(sorted((k, v) for k, v in p.items() if k not in ignore))


def channel_layout(prog: Any) -> tuple[tuple[int, ...], tuple[int, int]]:
    """Per port on an unshared channel, the channel state of its class; and the (read, write) bytes of the requests
    of the ports on shared channels, which report their own requests' bytes (as
    :func:`fpga.streaming.engine._channels` does)."""
    from fpga.streaming.engine import class_channels
    from fpga.streaming.program_format import R_BYTES, R_WRITE

    g_chan = class_channels(prog)[0]
    chans = prog.port_chan.tolist()
    lone: list[int] = []
    read = write = 0
    for port in range(prog.n_ports):
        g = int(prog.port_group[port])
        if chans.count(chans[port]) == 1:
            lone.append(int(g_chan[g]))
            continue
        rq = prog.r_table[prog.g_ptr[g] : prog.g_ptr[g + 1]]
        w = rq[:, R_WRITE] == 1
        read += int(rq[~w, R_BYTES].sum())
        write += int(rq[w, R_BYTES].sum())
    return tuple(lone), (read, write)


def memoized_facts(
    build: Callable[..., T], maxsize: int = 32, ignore: frozenset[str] = frozenset({CLOCK_PARAM})
) -> Callable[..., T]:
    """``build`` memoized by :func:`design_key` (it sees the parameters without those in ``ignore``, then any
    further arguments the caller passes, which must be the same for every point of a key); at most ``maxsize``
    entries, the least recently used dropped first. A HwmodelError it raises is memoized and raised again."""
    memo: collections.OrderedDict[tuple[tuple[str, Any], ...], Any] = collections.OrderedDict()

    def facts(p: Params, *extra: Any) -> T:
        key = design_key(p, ignore)
        try:
            got = memo[key]
            memo.move_to_end(key)
        except KeyError:
            try:
                got = build(dict(key), *extra)
            except HwmodelError as exc:
                got = exc
            memo[key] = got
            if len(memo) > maxsize:
                memo.popitem(last=False)
        if isinstance(got, HwmodelError):
            raise got
        return got  # type: ignore[no-any-return]

    facts.cache_clear = memo.clear  # type: ignore[attr-defined]
    return facts


def token_metrics(f: DesignFacts, run_hz: float, out: tuple[Any, ...]) -> dict[str, float]:
    """The simulated-token metrics of the fast engine's output ``out`` at kernel clock ``run_hz``: the same
    expressions as :class:`fpga.streaming.engine.TokenResult`'s properties and the power model, on the same
    integers, hence the same floats."""
    from fpga.hbm.channel import channel_counters
    from fpga.streaming.kernel import EC_BUSY
    from fpga.streaming.power import token_power_w

    _status, total, _start, cnt, _i, _l, _f, _e, st, _sweeps = out
    cycles = int(total)
    seconds = cycles / run_hz
    per_state = {c: channel_counters(st[c]) for c in set(f.class_of_lone_port)}
    read, write = f.shared_port_bytes
    for c in f.class_of_lone_port:
        read += per_state[c]["read_bytes"]
        write += per_state[c]["write_bytes"]
    achieved = (read + write) / seconds
    busy = {name: {"busy": int(cnt[i, EC_BUSY])} for i, name in enumerate(f.engine_names)}
    design = dataclasses.replace(f.design, clock_hz=run_hz)
    power = token_power_w(design, _PowerView(cycles, busy, achieved), use=f.use)
    return {
        "latency_s": seconds,
        "tokens_per_s": 1.0 / seconds,
        "cycles": float(cycles),
        "energy_per_token_j": power * seconds,
        "power_w": power,
        "hbm_bw_util": achieved / f.peak_bw_bytes_per_s,
        "ports_bw_util": achieved / f.ports_peak_bw_bytes_per_s,
    }


def kernel_output(f: DesignFacts, run_hz: float) -> tuple[Any, ...]:
    """One fast-engine run of the design's program at kernel clock ``run_hz``."""
    from fpga.hbm.channel import hbm_params
    from fpga.streaming.engine import run_kernel

    return run_kernel(hbm_params(f.board, run_hz, f.refresh_phase_cycles), f.program)


def status_ok(out: tuple[Any, ...]) -> bool:
    return not int(out[0])
