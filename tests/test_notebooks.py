"""The example notebooks under examples/notebooks execute top to bottom (nbclient, a real Jupyter kernel), use only
`import hwmodel as hw`, carry their outputs, and every number a fresh run prints equals the stored one within one
unit of its last printed digit (what a reader compares with); the frequency-scaling notebook reproduces the
README's figure."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "examples" / "notebooks").glob("*.ipynb"))
nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
NUMBER = re.compile(r"-?\d+(?:\.(\d+))?(?:e[-+]?\d+)?")


def _texts(nb: object) -> list[str]:
    """The text each code cell printed (streams and text/plain results), one string per cell, without blank lines:
    how the kernel splits a stream into chunks (and so where joining them leaves an empty line) depends on timing."""
    out = []
    for cell in nb.cells:  # type: ignore[attr-defined]
        if cell.cell_type != "code":
            continue
        text = "\n".join(
            o.get("text", "") or "".join(o.get("data", {}).get("text/plain", ""))
            for o in cell.get("outputs", [])
            if o.get("output_type") != "error"
        )
        out.append("\n".join(line for line in text.splitlines() if line.strip()))
    return out


def _run(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", record_timing=False, resources={"metadata": {"path": str(ROOT)}}
    ).execute()
    return _texts(nb)


def _numbers_agree(stored: str, fresh: str) -> str | None:
    """None when both texts are the same words and every number agrees to one unit of its last printed digit."""
    if NUMBER.sub("#", stored) != NUMBER.sub("#", fresh):
        return f"the text differs:\n{stored}\n---\n{fresh}"
    for a, b in zip(NUMBER.finditer(stored), NUMBER.finditer(fresh), strict=True):
        x, y = float(a.group(0)), float(b.group(0))
        unit = 10.0 ** -len(a.group(1) or "") * (10.0 ** int(a.group(0).split("e")[1]) if "e" in a.group(0) else 1)
        if abs(x - y) > unit * 1.000001:  # the printed rounding of a value within numerical noise may flip a digit
            return f"{a.group(0)} stored, {b.group(0)} now"
    return None


def test_the_notebooks_are_the_ones_the_builder_writes() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_notebooks", ROOT / "examples/notebooks/build_notebooks.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    assert sorted(mod.NOTEBOOKS) == [p.name for p in NOTEBOOKS] and len(NOTEBOOKS) >= 5
    for p in NOTEBOOKS:
        nb = nbformat.read(p, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert [c.source for c in code] == [src for kind, src in mod.NOTEBOOKS[p.name] if kind == "code"], p.name
        assert all(c.get("outputs") or "plt." in c.source for c in code), f"{p.name} is stored without outputs"
        src = "\n".join(c.source for c in code)
        imports = set(re.findall(r"^\s*(?:import|from)\s+([\w.]+)", src, flags=re.MULTILINE))
        assert {i.split(".")[0] for i in imports} <= {"hwmodel", "matplotlib", "tempfile", "pathlib"}, (p, imports)
        assert "from hwmodel." not in src  # the API only
        assert all("framework=" in line for line in src.splitlines() if "gpu_engine(" in line), p.name


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_and_prints_what_it_stores(path: Path) -> None:
    stored = _texts(nbformat.read(path, as_version=4))
    fresh = _run(path)
    assert "".join(fresh).strip()
    for i, (a, b) in enumerate(zip(stored, fresh, strict=True)):
        problem = _numbers_agree(a, b)
        assert problem is None, f"{path.name}, code cell {i + 1}: {problem} (rebuild: build_notebooks.py)"
    text = "\n".join(fresh)
    if path.name.startswith("01_"):
        m = re.search(r"linear projection ([\d.]+) ms/token, cycle model ([\d.]+) ms/token", text)
        assert m, text
        readme = " ".join((ROOT / "README.md").read_text().split())
        assert f"linear projection says {m.group(1)} ms/token" in readme, "README frequency figure is stale"
        assert f"the cycle model says {m.group(2)} ms" in readme, "README frequency figure is stale"
