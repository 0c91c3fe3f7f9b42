"""The planted-bug KVMU RTL of issue 29 (tests/test_kvmu_rtl_planted.py): four bug classes that the verifier
once missed, each a one- or two-line edit of the reference fpga/kvmu/rtl/kvmu.v, written out as ``<name>.v`` (module
``kvmu``) by :func:`write_planted` (``python tests/kvmu_planted.py DIR`` writes them for `hwmodel kvmu verify`)."""

from __future__ import annotations

import sys
from pathlib import Path

from fpga.kvmu.verify.mutants import REFERENCE_RTL

#: name -> (the bug, (exact text of the reference, found once; its replacement), ...)
PLANTED: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    **{
        f"narrow_run_counter_{w}": (
            f"the run counter `left` is {w} bits, so a speculate / ingest / wait of more than 2**{w} cycles ends early",
            (("reg [ARG_W-1:0] left;", f"reg [{w - 1}:0] left;"),),
        )
        for w in (2, 6, 12)
    },
    "run_kept_over_reset": (
        "`left` has a power-up value but no reset, so a run that rst interrupts goes on after it",
        (
            ("reg [ARG_W-1:0] left;", "reg [ARG_W-1:0] left = {ARG_W{1'b0}};  // power-up value instead of a reset"),
            ("            left <= {ARG_W{1'b0}};\n", ""),
        ),
    ),
    "status_kept_over_reset": (
        "`status` has a power-up value but no reset, so a refusal's status survives rst",
        (
            (
                "    reg [1:0]       busy_op;\n",
                "    reg [1:0]       busy_op;\n    initial status = 4'd0;  // power-up value instead of a reset\n",
            ),
            (
                "            status <= ST_OK;\n            kv_wr_en <= 1'b0;\n            kv_wr_addr",
                "            kv_wr_en <= 1'b0;\n            kv_wr_addr",
            ),
        ),
    ),
    "capacity_edge_overflow": (
        "the room check uses 24-bit capacity and ahead, so at capacities of 2**24 and more it wraps",
        (
            (
                "wire [PTR_W:0]   room     = {1'b0, cfg_capacity} - {1'b0, ahead_ptr};",
                "wire [PTR_W:0]   room     = {9'b0, cfg_capacity[23:0]} - {9'b0, ahead_ptr[23:0]};",
            ),
        ),
    ),
}


def planted_source(name: str) -> str:
    what, edits = PLANTED[name]
    src = REFERENCE_RTL.read_text()
    for old, new in edits:
        if src.count(old) != 1:
            raise ValueError(f"planted bug {name}: {old!r} occurs {src.count(old)} times in {REFERENCE_RTL}")
        src = src.replace(old, new)
    return f"// PLANTED BUG ({name}): {what}\n" + src


def write_planted(out_dir: Path) -> dict[str, Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name in PLANTED:
        paths[name] = out_dir / f"{name}.v"
        paths[name].write_text(planted_source(name))
    return paths


if __name__ == "__main__":
    for name, path in write_planted(Path(sys.argv[1])).items():
        print(f"{path}: {PLANTED[name][0]}")
