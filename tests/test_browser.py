"""The HTML pages in a real headless browser (Chromium from the OS packages; `.ci/run` installs it): they load with
no console message, the Pareto explorer draws one marker per front point, and a screenshot is not blank.
Without a Chromium on PATH these tests skip with the reason."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from hwmodel.dse import load_plan, read_report, run_sweep, write_report
from hwmodel.report.html import Study, write_index
from hwmodel.report.perfetto import Slice, write_chrome_trace
from tests.test_dse_support import spec_file

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)
needs_browser = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on PATH (apt-get install chromium; .ci/run installs it)"
)
_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--enable-logging=stderr",
    "--v=0",
    "--allow-file-access-from-files",
    "--window-size=1280,1000",
]


def _browse(page: Path, *extra: str) -> tuple[str, list[str]]:
    """(stdout, console lines) of one headless Chromium run on ``page``."""
    assert CHROMIUM is not None
    proc = subprocess.run(
        [CHROMIUM, *_FLAGS, *extra, page.resolve().as_uri()], capture_output=True, text=True, timeout=120
    )
    console = [ln for ln in proc.stderr.splitlines() if ":CONSOLE" in ln]
    return proc.stdout, console


def _not_blank(png: Path) -> float:
    import matplotlib.image as mpimg

    img = mpimg.imread(str(png))
    return float(np.asarray(img)[..., :3].std())


def _study_dir(root: Path) -> Study:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = root / "demo"
    d.mkdir(parents=True)
    (d / "report.md").write_text(
        "# Demo study\n\n| point | model | published |\n|---|---:|---:|\n| a | 1.24x | 1.28x |\n"
    )
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2], [1, 3, 2])
    fig.savefig(d / "figure.png", dpi=80)
    (d / "sub").mkdir()
    fig.savefig(d / "sub" / "inlined.png", dpi=60)
    plt.close(fig)
    # a report in a subfolder that shows its own figure by a relative path (as system A's report.md does)
    (d / "sub" / "report.md").write_text("# Sub report\n\n![inlined](inlined.png)\n\n[the figure](inlined.png)\n")
    write_chrome_trace(d / "timeline.json", {"fpga": [Slice(0, 1, "decode"), Slice(0.5, 2, "ingest")]})
    (d / "kvmu.vcd").write_text("$timescale 1 ns $end\n")
    return Study("demo", "A demo study with a table, a figure, a timeline and a waveform.", d)


@needs_browser
def test_index_page_loads_clean_and_renders_tables_figures_and_links(tmp_path: Path) -> None:
    study = _study_dir(tmp_path)
    page = write_index(tmp_path, [study, Study("empty", "A study that wrote nothing.", tmp_path / "none")])
    dom, console = _browse(page, "--dump-dom")
    assert console == [], console
    assert "<table>" in dom and "1.24x" in dom and "data:image/png;base64," in dom
    assert 'href="demo/timeline.json"' in dom and 'href="demo/kvmu.vcd"' in dom
    assert 'href="demo/sub/inlined.png"' in dom  # a report's relative link, rewritten from the index's folder
    shot = tmp_path / "shot.png"
    _browse(page, f"--screenshot={shot}")
    assert shot.exists() and _not_blank(shot) > 0.02


_IMAGE_CHECK = (
    "<script>window.addEventListener('load',()=>{const im=[...document.images];"
    "document.body.setAttribute('data-images',String(im.length));"
    "document.body.setAttribute('data-broken',String(im.filter(i=>!(i.complete&&i.naturalWidth>0))"
    ".length));});</script></body>"
)


@needs_browser
def test_every_image_on_the_index_loads(tmp_path: Path) -> None:
    """Every <img> of the index loads, including figures a report shows by a path relative to its own folder."""
    page = write_index(tmp_path, [_study_dir(tmp_path)])
    text = page.read_text()
    assert text.count("<img") == 2  # figure.png once; inlined.png only where its report shows it
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", _IMAGE_CHECK))
    dom, console = _browse(probe, "--dump-dom", "--virtual-time-budget=5000")
    assert console == [], console
    assert re.search(r'data-images="2"', dom) and re.search(r'data-broken="0"', dom), dom[-400:]


@needs_browser
def test_pareto_explorer_has_one_marker_per_front_point(tmp_path: Path) -> None:
    spec = spec_file(tmp_path, "lanes = [8, 16, 32, 64]\nports = [4, 8, 16]\nclock_mhz = [200, 300]\nbits = [4, 8]\n")
    plan = load_plan(spec)
    out = tmp_path / "out"
    run_sweep(plan, out, workers=1, progress=False)
    rep = read_report(plan, out)
    write_report(rep, out)
    page = out / "explorer.html"
    dom, console = _browse(page, "--dump-dom")
    assert console == [], console
    first_front = next(iter(rep.fronts.values()))
    assert 0 < len(first_front) < len(rep.feasible)
    assert len(re.findall(r'<circle[^>]*class="front"', dom)) == len(first_front)
    assert len(re.findall(r'<circle[^>]*class="(?:front|point)"', dom)) == len(rep.feasible)
    ids = set(re.findall(r'data-point="([^"]+)"', dom))
    assert {rep.rows[i].row.point_id for i in first_front} <= ids
    shot = tmp_path / "explorer.png"
    _browse(page, f"--screenshot={shot}")
    assert _not_blank(shot) > 0.02
