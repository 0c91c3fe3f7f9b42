"""Workers exit with their parent: after SIGKILL of the process that owns a pool, its busy worker ends too."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PARENT = """
import multiprocessing, os, sys, time
from concurrent.futures import ProcessPoolExecutor
from hwmodel.lifeline import worker_initializer
ctx = multiprocessing.get_context(sys.argv[1])
pool = ProcessPoolExecutor(max_workers=1, mp_context=ctx, initializer=worker_initializer, initargs=(os.getpid(),))
pid = pool.submit(os.getpid).result()
pool.submit(time.sleep, 3600)   # the worker is busy for an hour
print(pid, flush=True)
time.sleep(3600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its parent) counts as gone
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def _check(method: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", PARENT, method], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            text=True)
    worker = int(proc.stdout.readline())
    assert _alive(worker)
    os.kill(proc.pid, signal.SIGKILL)  # no finally, no atexit: only the lifeline can end the worker
    proc.wait()
    end = time.monotonic() + 60
    while _alive(worker):
        assert time.monotonic() < end, f"worker {worker} outlived its killed parent"
        time.sleep(0.05)


def test_worker_exits_after_parent_sigkill_forkserver() -> None:
    _check("forkserver")


def test_worker_exits_after_parent_sigkill_spawn() -> None:
    _check("spawn")
