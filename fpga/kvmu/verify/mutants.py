"""RTL mutants of the reference KVMU (fpga/kvmu/rtl/kvmu.v): one deliberately broken variant per model mutant of
tests/test_kvmu_properties.py, each a single textual edit of the reference source. `hwmodel kvmu verify` must catch
every one (tests/test_kvmu_rtl.py); :func:`write_mutants` writes them out as Verilog files to inspect or to verify
by hand (``hwmodel kvmu mutants --out DIR``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REFERENCE_RTL = Path(__file__).resolve().parents[1] / "rtl" / "kvmu.v"


@dataclass(frozen=True)
class RtlMutant:
    name: str
    model_mutant: str  # the mutant of tests/test_kvmu_properties.py it mirrors
    what: str
    edits: tuple[tuple[str, str], ...]  # (exact text of the reference, found exactly once; its replacement)

    def source(self, reference: str | None = None) -> str:
        src = reference if reference is not None else REFERENCE_RTL.read_text()
        for original, replacement in self.edits:
            count = src.count(original)
            if count != 1:
                raise ValueError(
                    f"mutant {self.name}: its original text occurs {count} times in {REFERENCE_RTL} "
                    f"(expected once): {original!r}"
                )
            src = src.replace(original, replacement)
        return f"// RTL mutant '{self.name}' (mirrors {self.model_mutant}): {self.what}\n" + src


def _m(name: str, model: str, what: str, *edits: tuple[str, str]) -> RtlMutant:
    return RtlMutant(name, model, what, tuple(edits))


_NL = "\n                        "  # the indentation of a command's body in fpga/kvmu/rtl/kvmu.v

MUTANTS: tuple[RtlMutant, ...] = (
    _m(
        "init_keeps_curr",
        "InitKeepsCurr",
        "init forgets curr (except where it must rise to keep the order)",
        (
            "curr_ptr <= cmd_arg[PTR_W-1:0];",
            "curr_ptr <= (curr_ptr > cmd_arg[PTR_W-1:0]) ? curr_ptr : cmd_arg[PTR_W-1:0];",
        ),
    ),
    _m(
        "speculate_moves_curr",
        "SpeculateMovesCurr",
        "speculate also moves curr with ahead",
        ("busy_op <= B_SPECULATE;", "busy_op <= B_SPECULATE;" + _NL + "curr_ptr <= ahead_ptr + 1'b1;"),
        (
            "        end else if (!cmd_ready) begin\n",
            "        end else if (!cmd_ready) begin\n            if (busy_op == B_SPECULATE) curr_ptr <= ahead_ptr + 1'b1;\n",
        ),
    ),
    _m(
        "accept_forgets_curr",
        "AcceptForgetsCurr",
        "accept: valid <- curr, but curr stays",
        ("valid_ptr <= curr_ptr;" + _NL + "curr_ptr <= ahead_ptr;", "valid_ptr <= curr_ptr;"),
    ),
    _m(
        "rollback_keeps_ahead",
        "RollbackKeepsAhead",
        "step-ahead tokens survive the rollback",
        ("curr_ptr <= valid_ptr;" + _NL + "ahead_ptr <= valid_ptr;", "curr_ptr <= valid_ptr;"),
    ),
    _m(
        "ingest_keeps_valid",
        "IngestKeepsValid",
        "the target's tokens are written but valid stays",
        (
            "if (busy_op == B_INGEST) begin\n                valid_ptr <= valid_ptr + 1'b1;\n",
            "if (busy_op == B_INGEST) begin\n",
        ),
        ("kv_wr_addr <= ahead_ptr;" + _NL + "valid_ptr <= valid_ptr + 1'b1;", "kv_wr_addr <= ahead_ptr;"),
    ),
    _m(
        "ingest_from_sampler",
        "IngestFromSampler",
        "ingest without the mux check",
        ("else if (!pcie) status <= ST_MUX_NOT_PCIE;\n", ""),
    ),
    _m(
        "mark_moves_valid",
        "MarkMovesValid",
        "mark commits instead of submitting",
        (
            "curr_ptr <= ahead_ptr;" + _NL + "mode <= M_SPECULATE;",
            "curr_ptr <= ahead_ptr;" + _NL + "valid_ptr <= ahead_ptr;" + _NL + "mode <= M_SPECULATE;",
        ),
    ),
    _m(
        "mux_stuck_on_sampler",
        "MuxStuckOnSampler",
        "the input mux always selects the sampler",
        ("assign mux_sel = (mode == M_INIT) || (mode == M_ROLLBACK);", "assign mux_sel = 1'b0;"),
    ),
    _m(
        "write_port_on_curr",
        "WritePortOnCurr",
        "speculate's first write goes to curr, not ahead",
        (
            "kv_wr_addr <= ahead_ptr;" + _NL + "ahead_ptr <= ahead_ptr + 1'b1;" + _NL + "left",
            "kv_wr_addr <= curr_ptr;" + _NL + "ahead_ptr <= ahead_ptr + 1'b1;" + _NL + "left",
        ),
    ),
    _m(
        "ingest_rewrites_last_verified",
        "IngestRewritesLastVerified",
        "an off-by-one write address: ingest's first token lands on the last verified slot",
        (
            "kv_wr_addr <= ahead_ptr;" + _NL + "valid_ptr <= valid_ptr + 1'b1;",
            "kv_wr_addr <= (ahead_ptr == 0) ? ahead_ptr : ahead_ptr - 1'b1;" + _NL + "valid_ptr <= valid_ptr + 1'b1;",
        ),
    ),
    _m(
        "capacity_off_by_one",
        "CapacityOffByOne",
        "the capacity check lets one token past the end",
        ("<= room);", "<= room + 1'b1);"),
    ),
    _m(
        "accept_curr_lands_late",
        "the kernel mutant (a kernel whose accept forgets curr)",
        "a timing bug: accept's curr update lands one edge late, then overrides whatever the next cycle writes to curr",
        ("reg [1:0]       busy_op;", "reg [1:0]       busy_op;\n    reg late;\n    reg [PTR_W-1:0] late_curr;"),
        (
            "valid_ptr <= curr_ptr;" + _NL + "curr_ptr <= ahead_ptr;",
            "valid_ptr <= curr_ptr;" + _NL + "late <= 1'b1;" + _NL + "late_curr <= ahead_ptr;",
        ),
        ("    always @(posedge clk) begin\n", "    always @(posedge clk) begin\n        late <= 1'b0;\n"),
        (
            "            status <= ST_OK;\n        end\n    end\nendmodule",
            "            status <= ST_OK;\n        end\n        if (!rst && late) curr_ptr <= late_curr;\n    end\n"
            "endmodule",
        ),
    ),
)


def write_mutants(out_dir: Path) -> dict[str, Path]:
    """Write every mutant as ``<name>.v`` (module name ``kvmu``) into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ref = REFERENCE_RTL.read_text()
    paths = {}
    for m in MUTANTS:
        p = out_dir / f"{m.name}.v"
        p.write_text(m.source(ref))
        paths[m.name] = p
    return paths
