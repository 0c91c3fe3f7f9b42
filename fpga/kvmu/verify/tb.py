"""The cocotb side of `hwmodel kvmu verify`: runs inside the simulator, connects to the verifier's socket
(``HWMODEL_KVMU_SOCKET``) and serves examples until told to stop. Per example it sets the capacity and drives the
bus as run-length segments (packed input word with the ``rst`` bit, number of edges), and records the packed
outputs (as binary strings, so X and Z survive) at the falling edges after the rows it is asked to observe, i.e.
between two rising edges. Stretches of rows it is not asked to observe run as one simulator timer (the clock is
the wrapper's own Verilog), so a run of 100,000 cycles costs the testbench a few Python steps, not 100,000. It
compares nothing: the scoreboard is the model, in the verifier's process (fpga/kvmu/verify/verify.py)."""

from __future__ import annotations

import json
import os
import socket

import cocotb
from cocotb.triggers import FallingEdge, Timer

PERIOD_NS = 10  # the wrapper's clock: `always #5 clk = ~clk` at 1 ns
IN_BITS = 36  # cmd_arg (32), cmd_op (3), cmd_valid (1); bit 36 of a word is rst


@cocotb.test()
async def serve(dut) -> None:  # type: ignore[no-untyped-def]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ["HWMODEL_KVMU_SOCKET"])
    reader = sock.makefile("r", encoding="ascii")
    writer = sock.makefile("w", encoding="ascii")
    tb_in, tb_rst, tb_cap, tb_out = dut.tb_in, dut.tb_rst, dut.tb_cap, dut.tb_out
    mask = (1 << IN_BITS) - 1
    await FallingEdge(dut.clk)  # from here on every wake-up is a whole number of periods after a falling edge
    for line in reader:
        req = json.loads(line)
        if req.get("stop"):
            break
        tb_cap.value = int(req["capacity"])
        observe = req["observe"]
        obs: list[str] = []
        row, j = 0, 0
        for word, count in req["segments"]:
            tb_in.value = word & mask
            tb_rst.value = (word >> IN_BITS) & 1
            end = row + count
            while row < end:
                nxt = observe[j] if j < len(observe) else end
                step = min(nxt, end - 1) - row + 1  # edges up to and including the next observed row
                await Timer(PERIOD_NS * step, unit="ns")
                row += step
                if j < len(observe) and row - 1 == observe[j]:
                    obs.append(str(tb_out.value))
                    j += 1
        writer.write(json.dumps({"observed": obs}) + "\n")
        writer.flush()
    sock.close()
