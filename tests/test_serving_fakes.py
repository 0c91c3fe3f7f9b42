"""Stand-in device engines for the serving tests (never shipped in the package), and checks of the stand-ins.

They implement the hwmodel Engine protocol with simple, exactly known laws (affine in tokens and context), so
the simulator's bookkeeping can be checked against hand computations. The default numbers echo the published
GLITCHES single-device figures for LLaMA2-7B (A100 HF FP16: 175.85 ms prefill of 1536 tokens, 24.26 ms/token;
U280 W4A8: ~5001 ms prefill, 21.50 ms/token) so the studies in the tests have realistic proportions.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from hwmodel.bounds import resident_bytes
from hwmodel.engine import Capability, Engine, Phase
from hwmodel.errors import UnknownNameError
from hwmodel.serving.devices import DeviceModel
from hwmodel.serving.engines import Builder, register_builder
from hwmodel.specs import GpuSpec, LinkSpec, LlmSpec, SpecLibrary, library


@dataclasses.dataclass
class AffineEngine:
    """prefill = a * n; decode(ctx) = b + c * ctx; batched step = b * (1 + growth * (B - 1)) + c * sum(ctx)."""

    CAPABILITIES = frozenset(
        {Capability.DECODER, Capability.PREFILLER, Capability.INGESTER, Capability.BATCH_DECODER, Capability.POWERED}
    )

    name: str
    prefill_per_token_s: float
    decode_base_s: float
    decode_per_ctx_s: float
    batch_growth: float = 0.05
    watts: float = 100.0
    idle_watts: float = 30.0
    padded: bool = False  # a batch's attention reads every sequence padded to the longest

    def prefill_s(self, n_tokens: int, ctx: int = 0) -> float:
        return self.prefill_per_token_s * n_tokens

    def decode_s(self, ctx: int) -> float:
        return self.decode_base_s + self.decode_per_ctx_s * ctx

    def decode_steps_s(self, ctx0: int, n_steps: int) -> np.ndarray:
        return np.array([self.decode_s(ctx0 + i) for i in range(n_steps)])

    def decode_batch_s(self, ctxs: list[int]) -> float:
        kv = len(ctxs) * max(ctxs) if self.padded else sum(ctxs)
        return self.decode_base_s * (1 + self.batch_growth * (len(ctxs) - 1)) + self.decode_per_ctx_s * kv

    def ingest_s(self, n_tokens: int, ctx: int) -> float:
        return self.prefill_s(n_tokens, ctx)

    def power_w(self, phase: Phase) -> float:
        return self.idle_watts if phase is Phase.IDLE else self.watts


# decode_s(ctx) averaged over ctx 1536..2046 equals the published per-token time
A100_LIKE = dict(
    prefill_per_token_s=0.17585 / 1536,
    decode_base_s=0.02426 - 1791 * 2e-7,
    decode_per_ctx_s=2e-7,
    watts=250.0 * 0.4,
    idle_watts=35.0,
)
U280_LIKE = dict(
    prefill_per_token_s=5.0012 / 1536,
    decode_base_s=0.0215 - 1791 * 1e-7,
    decode_per_ctx_s=1e-7,
    watts=46.0,
    idle_watts=20.0,
)


class FakeFactory:
    """Builds DeviceModels from the cluster groups using AffineEngines (FPGA designs: 'fake-u280' family)."""

    def __init__(
        self,
        gpu_kw: dict[str, Any] | None = None,
        fpga_kw: dict[str, Any] | None = None,
        fpga_memory_bytes: int = 8 * 2**30,
        fpga_weights_bytes: int | None = None,
        fpga_kv_bits: int = 8,
        gpu_memory_bytes: int | None = None,
        gpu_padded: bool = False,
    ) -> None:
        self.gpu_kw = gpu_kw or A100_LIKE
        self.fpga_kw = fpga_kw or U280_LIKE
        self.fpga_memory_bytes = fpga_memory_bytes
        self.fpga_weights_bytes = fpga_weights_bytes
        self.fpga_kv_bits = fpga_kv_bits
        self.gpu_memory_bytes = gpu_memory_bytes
        self.gpu_padded = gpu_padded
        self.built: dict[str, DeviceModel] = {}

    def save(self) -> None:
        """Nothing to keep between runs."""

    def build(self, group: Any, llm: LlmSpec, lib: SpecLibrary, where: str, field: str) -> DeviceModel:
        """Stand-in engines: an A100-like one for any GPU spec name, a U280-like one for any other device."""
        try:
            spec = lib.gpu(group.device)
        except UnknownNameError:
            return self.fpga(group, llm, lib, where, field)
        return self.gpu(group, spec, llm, lib.link(group.link or spec.host_link))

    def gpu(self, group: Any, spec: GpuSpec, llm: LlmSpec, link: LinkSpec) -> DeviceModel:
        key = f"gpu:{spec.name}:{group.max_decode_batch}"
        if key not in self.built:
            self.built[key] = DeviceModel(
                label=spec.name,
                engine=AffineEngine(spec.name, **self.gpu_kw, padded=self.gpu_padded),
                llm=llm,
                memory_bytes=self.gpu_memory_bytes or spec.memory_bytes,
                weights_bytes=resident_bytes(llm, 16, 16, 0),
                kv_bits=getattr(group, "kv_bits", None) or 16,
                link=link,
                price_usd=spec.price_usd,
                max_decode_batch=group.max_decode_batch,
                mem_bw_bytes_per_s=spec.mem_bw_measured_bytes_per_s,
                padded_batch=self.gpu_padded,
            )
        return self.built[key]

    def fpga(self, group: Any, llm: LlmSpec, lib: SpecLibrary, where: str, field: str) -> DeviceModel:
        key = f"fpga:{group.device}"
        if key not in self.built:
            board = lib.board("u280")
            weights = self.fpga_weights_bytes if self.fpga_weights_bytes is not None else resident_bytes(llm, 4, 8, 0)
            self.built[key] = DeviceModel(
                label=group.device,
                engine=AffineEngine(group.device, **self.fpga_kw),
                llm=llm,
                memory_bytes=self.fpga_memory_bytes,
                weights_bytes=weights,
                kv_bits=self.fpga_kv_bits,
                link=lib.link(group.link or board.host_link),
                price_usd=board.price_usd,
                host_sampled=True,
            )
        return self.built[key]


# the stand-in FPGA design's name is known to the cluster loader through a builder of its own (adding a device
# family is one registered builder)
register_builder(
    Builder(
        "fake",
        lambda name, _lib: name.startswith("fake-"),
        lambda group, llm, lib, where, field: FakeFactory().fpga(group, llm, lib, where, field),
        frozenset(),
        "stand-in FPGA designs named fake-*, tests only",
    )
)


def test_affine_engine_is_an_engine() -> None:
    assert isinstance(AffineEngine("x", **A100_LIKE), Engine)


def test_published_proportions() -> None:
    gpu, fpga = AffineEngine("g", **A100_LIKE), AffineEngine("f", **U280_LIKE)
    assert abs(gpu.prefill_s(1536) - 0.17585) < 1e-12
    assert abs(sum(gpu.decode_s(c) for c in range(1536, 2047)) / 511 - 0.02426) < 1e-9
    assert abs(sum(fpga.decode_s(c) for c in range(1536, 2047)) / 511 - 0.0215) < 1e-9
    assert 28 < fpga.prefill_s(1536) / gpu.prefill_s(1536) < 29  # published 28.44x


def test_fake_factory_builds_from_library() -> None:
    lib = library()
    m = FakeFactory().fpga(type("G", (), {"device": "fake-u280", "link": None})(), lib.llm("llama2-7b"), lib, "x", "y")
    assert m.fits_alone(4096) and m.link.name == "pcie-gen3-x16"


def test_batched_decode_table_matches_engine() -> None:
    """The grid + interpolation of DeviceModel.decode_batch_s equals direct engine calls for an engine whose
    batched step depends on batch size and KV read (affine here, so interpolation is exact up to rounding)."""
    import random

    lib = library()
    llm, gpu = lib.llm("llama2-7b"), lib.gpu("a100-40gb")
    for padded in (False, True):
        group = type("G", (), {"max_decode_batch": 8, "kv_bits": 16})()
        m = FakeFactory(gpu_padded=padded).gpu(group, gpu, llm, lib.link("pcie-gen4-x16"))
        rng = random.Random(1)
        for _ in range(200):
            ctxs = [rng.randrange(1, 4000) for _ in range(rng.randrange(2, 9))]
            assert abs(m.decode_batch_s(ctxs) - m.engine.decode_batch_s(ctxs)) < 1e-12
