"""Engine builders of the serving simulator: a cluster's device group -> a :class:`DeviceModel`, and the
capability check of every device against its role.

A *builder* knows one family of device names and how to make an engine of it: ``gpu`` (GPU specs,
gpu/devices/*.toml, with a serving framework: :class:`gpu.latency.GpuEngine`), ``instruction``
(instruction-driven FPGA designs, fpga/designs/instruction/*.toml: :class:`fpga.instruction.engine.InstructionEngine`)
and ``streaming`` (streaming FPGA designs, fpga/designs/*.toml: :class:`fpga.streaming.engine.StreamingEngine`). Builders
are registered in :data:`BUILDERS` (:func:`register_builder`); a group names its builder with ``engine`` or lets
the first builder that knows the device name take it. The simulator itself never asks what a device is: it reads
the role (prefill pool, decode pool) and the capabilities the engine declares (:mod:`hwmodel.engine`).

Capabilities: every engine class declares its ``CAPABILITIES`` (:mod:`hwmodel.engine`); the builder passes the
engine to the device model as it is.

Role requirements (:data:`ROLE_NEEDS`, checked by :func:`check_roles` when the devices are built, with the cluster
file, the field, the role, the device and the missing capability in the error):

* prefill pool: prefiller and decoder (a prefill device decodes a request itself when no decode-pool device is
  free); batch-decoder as well when ``max_decode_batch > 1``;
* decode pool: decoder; prefiller as well in a cluster without any prefill pool (the decoder prefills).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from hwmodel.engine import Capability, require
from hwmodel.errors import HwmodelError, SpecError, UnknownNameError
from hwmodel.registry import Registry
from hwmodel.serving.devices import DeviceModel
from hwmodel.specs import LlmSpec, SpecLibrary

C = Capability


@dataclasses.dataclass(frozen=True)
class Builder:
    """One family of devices: ``knows(name, lib)`` says whether a device name is one of them; ``build(group, llm,
    lib, where, field)`` makes the device model; ``fields`` are the group fields it accepts besides the common
    ones (device, count, engine, max_decode_batch, link)."""

    name: str
    knows: Callable[[str, SpecLibrary], bool]
    build: Callable[[Any, LlmSpec, SpecLibrary, str, str], DeviceModel]
    fields: frozenset[str]
    describe: str = ""


#: engine builders by name, in registration order (the project's one registry mechanism, :mod:`hwmodel.registry`)
BUILDERS: Registry[Builder] = Registry("serving engine builder")
_OPTIONAL_FIELDS = ("framework", "weight_bits", "kv_bits", "prefetch_ratio", "clock_hz", "decode_table")


def register_builder(builder: Builder) -> Builder:
    """Add an engine builder (a new device family is one builder, in its own module if you like)."""
    return BUILDERS.register(builder.name, builder, replace=True)


def resolve_builder(group: Any, lib: SpecLibrary, where: str, field: str) -> Builder:
    """The builder of ``group``: the one it names, else the first that knows its device name; refuses a field
    the builder does not use."""
    if group.engine is not None:
        if group.engine not in BUILDERS:
            raise SpecError(where, f"{field}.engine", "one of " + ", ".join(BUILDERS.names()), group.engine)
        b = BUILDERS.get(group.engine)
        if not b.knows(group.device, lib):
            raise SpecError(
                where, f"{field}.device", f"a device the '{b.name}' builder knows ({b.describe})", group.device
            )
    else:
        builders = [b for _name, b in BUILDERS.items()]
        found = [b for b in builders if b.knows(group.device, lib)]
        if not found:
            raise SpecError(
                where,
                f"{field}.device",
                "a GPU spec or an FPGA design name (" + "; ".join(f"{b.name}: {b.describe}" for b in builders) + ")",
                group.device,
            )
        b = found[0]
    for f in _OPTIONAL_FIELDS:
        if getattr(group, f) is not None and f not in b.fields:
            raise SpecError(
                where,
                f"{field}.{f}",
                f"no {f} (the '{b.name}' builder of {group.device!r} does not use it)",
                getattr(group, f),
            )
    return b


# ---------------------------------------------------------------------------------------------------- roles
ROLES = ("prefill", "decode")


def role_needs(role: str, group: Any, cluster_has_prefill_pool: bool) -> list[Capability]:
    """The capabilities a device needs in ``role`` (module docstring)."""
    if role == "prefill":
        need = [C.PREFILLER, C.DECODER]
        if group.max_decode_batch > 1:
            need.append(C.BATCH_DECODER)
        return need
    need = [C.DECODER]
    if not cluster_has_prefill_pool:
        need.append(C.PREFILLER)
    if group.max_decode_batch > 1:
        raise HwmodelError(
            "decode-pool devices decode one request at a time (max_decode_batch = 1); put a "
            "batching device in the prefill pool"
        )
    return need


def check_roles(spec: Any, models: dict[tuple[int, str, int], DeviceModel]) -> None:
    """Refuse any device whose engine lacks a capability its role needs (cluster file, field, role, device)."""
    where = spec.origin or spec.name
    has_prefill = spec.prefill_count > 0
    for i, role, j, g in spec.groups():
        field = f"nodes[{i}].{role}[{j}]"
        try:
            need = role_needs(role, g, has_prefill)
        except HwmodelError as exc:
            raise SpecError(where, f"{field}.max_decode_batch", str(exc), g.max_decode_batch) from None
        require(models[(i, role, j)].engine, need, f"{role} pool", f"{where}: {field} ({g.device})")


# ---------------------------------------------------------------------------------------------------- builders
def _gpu_knows(name: str, lib: SpecLibrary) -> bool:
    try:
        lib.gpu(name)
        return True
    except UnknownNameError:
        return False


def _build_gpu(group: Any, llm: LlmSpec, lib: SpecLibrary, where: str, field: str) -> DeviceModel:
    from gpu.latency import GpuEngine

    spec = lib.gpu(group.device)
    link = lib.link(group.link or spec.host_link)
    kv_bits = group.kv_bits or 16
    try:
        engine = GpuEngine(
            spec, llm, framework=group.framework or "hf", weight_bits=group.weight_bits or 16, kv_bits=kv_bits
        )
    except HwmodelError as exc:
        raise SpecError(where, f"{field}.device", f"a GPU that serves {llm.name} ({exc})", group.device) from None
    rf = engine.roofline

    def kv_quant_s(read_bytes: float, write_bytes: float) -> float:
        """One memory-bound kernel per layer on the GPU (the convention of interconnect.pcie.kv_migration)."""
        return rf.t_kernel_s + (read_bytes + write_bytes) / (rf.eta_bw * rf.bw_bytes_per_s)

    return DeviceModel(
        label=spec.name,
        engine=engine,
        llm=llm,
        memory_bytes=spec.memory_bytes,
        weights_bytes=int(engine.weights_bytes),
        kv_bits=kv_bits,
        link=link,
        price_usd=spec.price_usd,
        max_decode_batch=group.max_decode_batch,
        mem_bw_bytes_per_s=spec.mem_bw_measured_bytes_per_s,
        padded_batch=engine.framework.kv_layout == "padded",
        kv_quant_s=kv_quant_s,
        host_sampled=False,
        decode_table=group.decode_table or "exact",
        cache_key=("gpu", repr(spec), repr(llm), group.framework or "hf", group.weight_bits or 16, kv_bits),
    )


def _instruction_knows(name: str, lib: SpecLibrary) -> bool:
    from fpga.instruction.engine import design_names

    return name in design_names()


def _build_instruction(group: Any, llm: LlmSpec, lib: SpecLibrary, where: str, field: str) -> DeviceModel:
    from fpga.instruction.engine import InstructionEngine, load_design

    design = load_design(group.device)
    if design.llm != llm.name:
        raise SpecError(
            where,
            f"{field}.device",
            f"a design for the cluster's LLM {llm.name!r} (this design runs {design.llm!r})",
            group.device,
        )
    _check_clock(design.board_spec, group, where, field)
    engine = InstructionEngine(design, prefetch_ratio=group.prefetch_ratio, clock_hz=group.clock_hz)
    board = lib.board(design.board)
    return DeviceModel(
        label=group.device,
        engine=engine,
        llm=llm,
        memory_bytes=board.memory_bytes,
        weights_bytes=int(engine.weights_bytes),
        kv_bits=design.kv_bits,
        link=lib.link(group.link or board.host_link),
        price_usd=board.price_usd,
        max_decode_batch=1,
        kv_bytes_fn=engine.kv_bytes,
        host_sampled=True,
        decode_table=group.decode_table or "steps",
        prefill_grid_tokens=int(design.tiling.prefill_token_block),
        cache_key=("instruction", repr(engine.design), repr(board), repr(llm), engine.prefetch_ratio),
    )


def _check_clock(board: Any, group: Any, where: str, field: str) -> None:
    """An FPGA group's clock override within the board's kernel-clock range (hwmodel.domains)."""
    if group.clock_hz is not None:
        from hwmodel.domains import kernel_clock_problem

        problem = kernel_clock_problem(board, group.clock_hz)
        if problem:
            raise SpecError(where, f"{field}.clock_hz", problem, group.clock_hz)


def _streaming_knows(name: str, lib: SpecLibrary) -> bool:
    from fpga.streaming.design import design_names

    return name in design_names()


def _build_streaming(group: Any, llm: LlmSpec, lib: SpecLibrary, where: str, field: str) -> DeviceModel:
    from fpga.streaming.design import DesignError
    from fpga.streaming.engine import StreamingEngine

    try:
        if group.clock_hz is not None:
            from fpga.streaming.design import load_design

            _check_clock(load_design(group.device).board_spec(), group, where, field)
        engine = StreamingEngine(group.device, clock_hz=group.clock_hz)
    except DesignError as exc:
        raise SpecError(where, f"{field}.device", f"a valid streaming design ({exc})", group.device) from None
    design = engine.design
    if design.llm != llm.name:
        raise SpecError(
            where,
            f"{field}.device",
            f"a design for the cluster's LLM {llm.name!r} (this design runs {design.llm!r})",
            group.device,
        )
    board = engine.board
    from fpga.streaming.lowering import quant_of
    from hwmodel.graph import resident_param_bytes

    # every parameter of the graph under the design's quantization (packed weights, scales, biases, norm gains),
    # counted as the GPU builder counts them (hwmodel.bounds.resident_bytes)
    weights = resident_param_bytes(llm, quant_of(design)).params
    return DeviceModel(
        label=group.device,
        engine=engine,
        llm=llm,
        memory_bytes=board.memory_bytes,
        weights_bytes=int(weights),
        kv_bits=design.kv_bits,
        link=lib.link(group.link or board.host_link),
        price_usd=board.price_usd,
        max_decode_batch=1,
        host_sampled=True,
        decode_table=group.decode_table or "grid",
        max_ctx=design.max_ctx,
        prefill_grid_tokens=128,
        cache_key=("streaming", repr(design), repr(board), repr(llm)),
    )


register_builder(
    Builder(
        "gpu",
        _gpu_knows,
        _build_gpu,
        frozenset({"framework", "weight_bits", "kv_bits", "decode_table"}),
        "GPU specs, gpu/devices/*.toml",
    )
)
register_builder(
    Builder(
        "instruction",
        _instruction_knows,
        _build_instruction,
        frozenset({"prefetch_ratio", "clock_hz", "decode_table"}),
        "instruction-driven designs, fpga/designs/instruction/*.toml",
    )
)
register_builder(
    Builder(
        "streaming",
        _streaming_knows,
        _build_streaming,
        frozenset({"clock_hz", "decode_table"}),
        "streaming designs, fpga/designs/*.toml",
    )
)
