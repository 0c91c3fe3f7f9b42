"""The example notebooks under examples/notebooks execute top to bottom (nbclient, a real Jupyter kernel), use only
`import hwmodel as hw`, and the frequency-scaling notebook reproduces the README's figure."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "examples" / "notebooks").glob("*.ipynb"))
nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")


def _run(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            out.append(o.get("text", "") or "".join(o.get("data", {}).get("text/plain", "")))
    return "\n".join(out)


def test_the_notebooks_are_the_ones_the_builder_writes() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_notebooks", ROOT / "examples/notebooks/build_notebooks.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    assert sorted(mod.NOTEBOOKS) == [p.name for p in NOTEBOOKS] and len(NOTEBOOKS) >= 4
    for p in NOTEBOOKS:
        src = "\n".join(c.source for c in nbformat.read(p, as_version=4).cells if c.cell_type == "code")
        imports = set(re.findall(r"^\s*(?:import|from)\s+([\w.]+)", src, flags=re.M))
        assert {i.split(".")[0] for i in imports} <= {"hwmodel", "matplotlib", "tempfile", "pathlib"}, (p, imports)
        assert "from hwmodel." not in src  # the API only


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path: Path) -> None:
    text = _run(path)
    assert text.strip()
    if path.name.startswith("01_"):
        m = re.search(r"linear projection ([\d.]+) ms/token, cycle model ([\d.]+) ms/token", text)
        assert m, text
        readme = " ".join((ROOT / "README.md").read_text().split())
        assert f"linear projection says {m.group(1)} ms/token" in readme, "README frequency figure is stale"
        assert f"the cycle model says {m.group(2)} ms" in readme, "README frequency figure is stale"
