"""A streaming design checked against its board and model before it is simulated: ports and pseudo-channels,
the kernel clock the board can run (hwmodel.domains), resources (:mod:`fpga.streaming.resources`) and whether
the weights and the KV cache reserved for ``max_ctx`` fit the HBM the ports reach. Each failure is one
:class:`~fpga.streaming.design.DesignError` line with the numbers and the design's file."""

from __future__ import annotations

from fpga.streaming.design import DesignError, StreamingDesign, check_structure
from fpga.streaming.ports import channel_bases, channel_count, port_problems, shared
from hwmodel.specs import BoardSpec, LlmSpec


def validate_design(design: StreamingDesign, board: BoardSpec | None = None, llm: LlmSpec | None = None) -> None:
    """Check a design against its board and model; raise DesignError (a HwmodelError) with the numbers:
    ports, clock, resources (see :mod:`fpga.streaming.resources`), and whether weights + KV cache fit the ports' HBM."""
    try:
        _validate_design(design, board, llm)
    except DesignError as exc:  # name the design's file, not just its name
        msg = str(exc)
        if design.origin and design.origin not in msg:
            exc.args = (f"{design.origin}: {msg}",)  # same error type (e.g. DeadlockError), the file named
        raise


def _validate_design(design: StreamingDesign, board: BoardSpec | None, llm: LlmSpec | None) -> None:
    from fpga.streaming.resources import check_fits

    check_structure(design)
    board = board or design.board_spec()
    llm = llm or design.llm_spec()
    if design.units:  # each unit against its share of the board (fpga/streaming/units_result.py)
        from fpga.streaming.units_result import validate_units

        return validate_units(design, board, llm)
    h = board.hbm
    if channel_count(design) > h.axi_ports:
        raise DesignError(
            f"design '{design.name}' uses {channel_count(design)} HBM "
            f"{'pseudo-channels' if shared(design) else 'ports'} but board '{board.name}' has "
            f"{h.axi_ports} "
            f"({', '.join(f'{e.name}: {e.ports}' for e in design.engines if e.ports)})"
        )
    for problem in port_problems(design, h.axi_ports):
        raise DesignError(f"design '{design.name}': {problem}")
    check_design_clock(design, board)
    check_hbm_capacity(design, board, llm)
    check_fits(design, board, llm)


def check_design_clock(design: StreamingDesign, board: BoardSpec) -> None:
    """The kernel clock must be one the board can run (hwmodel.domains), whether it comes from the design file, a
    command-line override or a sweep; the error names the design's file."""
    from hwmodel.domains import kernel_clock_problem

    problem = kernel_clock_problem(board, design.clock_hz)
    if problem:
        where = f"{design.origin}: field 'clock_hz'" if design.origin else f"design '{design.name}': clock_hz"
        raise DesignError(f"{where}: expected {problem}, got {design.clock_hz / 1e6:g} MHz")


def check_hbm_capacity(design: StreamingDesign, board: BoardSpec, llm: LlmSpec) -> None:
    """Weights striped over an engine's ports, plus the KV cache reserved for ``max_ctx`` tokens, must fit the
    pseudo-channels those ports use."""
    from fpga.streaming.lowering import embedding_table_bytes
    from fpga.streaming.templates import _static_parts, kv_region_bytes

    total_w = list(_static_parts(design, board, llm, True).total_w)
    pc_bytes = board.hbm.pc_capacity_bytes // board.hbm.ports_per_pc
    a = design.engines.index(design.engine_of("attention"))
    kv = kv_region_bytes(design, llm, board) * 2 * llm.kv_heads * llm.layers
    # an untied embedding table is stored too (one row is read per token), and a tied one whose LM head runs on the
    # host; an embedding gathered on the host stores nothing
    if "embed" not in design.host_ops and (not llm.tied_embeddings or "lm_head" in design.host_ops):
        emb = design.engines.index(design.engine_of("embed"))
        total_w[emb] += -(-embedding_table_bytes(design, llm) // design.engines[emb].ports)
    needs = []
    for i, e in enumerate(design.engines):
        need = total_w[i]
        if i == a:  # the KV cache starts at the next MiB after the weights
            need = (-(-need // (1 << 20)) << 20) + kv
        needs.append(need)
        if not e.ports:
            continue
        if need > pc_bytes:
            raise DesignError(
                f"design '{design.name}': {llm.name} does not fit HBM: engine '{e.name}' needs {need / 2**20:.0f} MiB "
                f"per port (weights{' + KV cache for max_ctx ' + str(design.max_ctx) if i == a else ''}) but each of "
                f"its {e.ports} ports reaches a {pc_bytes / 2**20:.0f} MiB share of a pseudo-channel on "
                f"'{board.name}'"
            )
    if shared(design):  # engines sharing a channel stack their data on it (fpga.streaming.ports.channel_bases)
        ends = [b + needs[int(e)] for b, e in zip(channel_bases(design, needs), _port_engines(design))]
        if max(ends) > pc_bytes:
            raise DesignError(
                f"design '{design.name}': {llm.name} does not fit HBM: the engines sharing a pseudo-channel "
                f"need {max(ends) / 2**20:.0f} MiB of it but a port reaches a {pc_bytes / 2**20:.0f} MiB "
                f"share on '{board.name}'"
            )


def _port_engines(design: StreamingDesign) -> list[int]:
    return [i for i, e in enumerate(design.engines) for _ in range(e.ports)]
