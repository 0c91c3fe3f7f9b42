"""Published open-source FPGA decoders (examples/designs/published/) against the measurements found for them.

Each design file and its prediction were committed before any measured figure of the design was read, and the
design files are never changed because of one (examples/designs/published/README.md, issue 33 item 7). The
measurements are in ``measured.toml`` beside the designs; this module re-runs the committed design at the measured
point (so a model change moves the row) and reports it as *predicted*: nothing is fitted to these designs; the
streaming engine runs on the HBM model, whose one fitted parameter (``hbm`` family) is the row's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hwmodel.validate.providers import Provider, register
from hwmodel.validate.rows import row

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "examples" / "designs" / "published"
MEASURED = FOLDER / "measured.toml"
AREA = "FPGA published designs"


def predict_s(entry: dict[str, Any], band: bool = False) -> tuple[float, list[float] | None, str]:
    """Seconds per token of the committed design at the entry's context (kernel time, as the measurement); with
    ``band``, the design's prediction band -- the one ``hwmodel fpga decode --sensitivity`` prints
    (:mod:`hwmodel.studies.sensitivity`: every guessed field to its ends one at a time, then all together) -- and
    how it was computed."""
    from fpga.streaming.design import load_design
    from fpga.streaming.engine import StreamingEngine
    from hwmodel.specs import extra_spec_dirs, set_extra_spec_dirs
    from hwmodel.studies.sensitivity import sensitivity

    before = extra_spec_dirs()
    extra = (ROOT / entry["spec_dir"],) if entry.get("spec_dir") else ()
    set_extra_spec_dirs(tuple(before) + extra)
    try:
        design = load_design(FOLDER / f"{entry['design']}.toml")

        def token_s(d: Any) -> float:
            return StreamingEngine(d).token(int(entry["ctx"]), with_lm_head=not entry.get("ingest", False)).seconds

        if not band:
            return token_s(design), None, ""
        s = sensitivity(design, token_s)
        lo, hi = s["band_s"]
        how = (
            f"the design's guessed fields ({', '.join(s['varied']) or 'none'}) at their ends one at a time and all "
            "together (hwmodel/studies/sensitivity.py, as `hwmodel fpga decode --sensitivity`); the board's "
            "[estimate] fields and the HBM fitted input not varied"
        )
        if lo is None or hi is None:
            how += "; an all-together end the model refuses: " + "; ".join(s["band_errors"].values())
        nominal = s["nominal_s"]
        return nominal, [nominal if lo is None else lo, nominal if hi is None else hi], how
    finally:
        set_extra_spec_dirs(before)


def rows() -> list[dict[str, Any]]:
    """One predicted row per measurement in ``measured.toml``."""
    from hwmodel.schema import read_toml

    out = []
    for entry in read_toml(MEASURED).get("measurement", []):
        model, model_band, how = predict_s(entry, band=True)
        out.append(
            row(
                AREA,
                f"{entry['design']}-{entry['metric']}",
                model,
                "s",
                "predicted",
                entry["source"],
                published=float(entry["measured_s"]),
                families=["hbm"],
                workload=f"{entry['design']} (examples/designs/published), ctx {entry['ctx']}"
                + (", ingest (head on the host)" if entry.get("ingest") else ""),
                note=entry.get("note", "") + "; measurement read after the design and its prediction were committed",
                quantity=entry["metric"],
            )
        )
        out[-1]["model_band"], out[-1]["band_sources"] = model_band, how
    return out


register(Provider(__name__, lambda s: rows(), rank=15, area_module=True))  # a row provider of `hwmodel validate`
