"""Point functions for checking the study runner itself (its tests and a quick look at a cluster): pure, cheap,
importable by any worker process."""

from __future__ import annotations

import math
import os
import signal
import threading
from pathlib import Path
from typing import Any


def mix(spec: dict[str, Any]) -> dict[str, Any]:
    """A deterministic, float-heavy result of ``spec["x"]`` (so bit-identity across processes is tested)."""
    x = float(spec["x"])
    acc = 0.0
    for k in range(1, 200):
        acc += math.sin(x * k) / k + math.sqrt(k * abs(x) + 1.0) * 1e-3
    return {"x": x, "acc": acc, "tag": spec.get("tag", ""), "pid_free": True}


def park(spec: dict[str, Any]) -> None:
    """Write this worker's pid under ``spec["pid_dir"]``, then block until the process is killed (a point that
    never ends: the parent-death test kills the parent while workers sit here)."""
    d = Path(spec["pid_dir"])
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".{os.getpid()}.tmp"
    tmp.write_text(str(os.getpid()))
    tmp.rename(d / f"{os.getpid()}.pid")
    threading.Event().wait()  # never set: the process ends only by a signal


def interrupt(spec: dict[str, Any]) -> None:
    """Send SIGINT (Ctrl-C) to the process ``spec["signal_pid"]`` if given (the study's), then :func:`park` (the
    Ctrl-C test: the signal reaches the parent while its workers run)."""
    if spec.get("signal_pid"):
        os.kill(int(spec["signal_pid"]), signal.SIGINT)
    park(spec)
