"""The cocotb side of `hwmodel kvmu verify`: runs inside the simulator, connects to the verifier's socket
(``HWMODEL_KVMU_SOCKET``) and serves examples until told to stop. Per example it holds reset for two edges with the
example's capacity, then drives one packed bus word per cycle and records the packed outputs (as binary strings,
so X and Z survive) at each falling edge, i.e. between two rising edges. It compares nothing: the scoreboard is
the model, in the verifier's process (fpga/kvmu_verify/verify.py)."""
from __future__ import annotations

import json
import os
import socket

import cocotb
from cocotb.triggers import FallingEdge


@cocotb.test()
async def serve(dut) -> None:  # type: ignore[no-untyped-def]
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(os.environ["HWMODEL_KVMU_SOCKET"])
    reader = sock.makefile("r", encoding="ascii")
    writer = sock.makefile("w", encoding="ascii")
    tb_in, tb_rst, tb_cap, tb_out, clk = dut.tb_in, dut.tb_rst, dut.tb_cap, dut.tb_out, dut.clk
    falling = FallingEdge(clk)
    await falling
    for line in reader:
        req = json.loads(line)
        if req.get("stop"):
            break
        tb_rst.value = 1
        tb_cap.value = int(req["capacity"])
        tb_in.value = 0
        await falling
        await falling
        tb_rst.value = 0
        obs = [str(tb_out.value)]
        for word in req["stimulus"]:
            tb_in.value = int(word)
            await falling
            obs.append(str(tb_out.value))
        writer.write(json.dumps({"observed": obs}) + "\n")
        writer.flush()
    sock.close()
