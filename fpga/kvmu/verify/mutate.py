"""A mutation generator for Verilog and the mutation campaign of `hwmodel kvmu verify` over the reference RTL
(fpga/kvmu/rtl/kvmu.v).

No maintained Verilog mutation tool fits (docs/kvmu.md, "Mutation campaign"), so this is a small one of our own:
it reads the module body line by line (comments and the port list are left alone) and makes one mutant per
site and operator:

* ``operator``: ``==``/``!=`` swapped, ``&&``/``||`` swapped, ``+``/``-`` swapped, a ``!`` dropped or added;
* ``comparison``: ``<=``/``<``/``>=``/``>`` in an expression (not a non-blocking assignment) turned into each other;
* ``constant``: a sized literal (``1'b0``, ``2'd1``, ``4'd7``) moved by one or flipped, a localparam value moved;
* ``condition``: an ``if (c)`` made ``if (!(c))``, ``if (1'b1)`` and ``if (1'b0)``;
* ``reset``: each assignment of the reset branch given another value (all ones / one);
* ``width``: each vector declaration one bit narrower (``[W-1:0]`` to ``[W-2:0]``, ``[N:0]`` to ``[N-1:0]``);
* ``statement``: each non-blocking assignment deleted.

:func:`run_campaign` runs each mutant through :func:`fpga.kvmu.verify.verify.run_examples` (no shrinking: the
campaign asks only whether the mutant is caught) and records killed / survived / stillborn (does not compile).
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from fpga.kvmu.verify.mutants import REFERENCE_RTL

OPERATORS = ("operator", "comparison", "constant", "condition", "reset", "width", "statement")


@dataclass(frozen=True)
class Mutant:
    """One mutant: line ``line`` (1-based) of the reference replaced by ``new``."""

    ident: str
    operator: str
    line: int
    old: str
    new: str

    def source(self, reference: str) -> str:
        lines = reference.split("\n")
        assert lines[self.line - 1] == self.old, f"mutant {self.ident}: line {self.line} changed"
        lines[self.line - 1] = self.new
        return f"// mutant {self.ident} ({self.operator}), line {self.line}\n" + "\n".join(lines)


def _split_comment(line: str) -> tuple[str, str]:
    i = line.find("//")
    return (line, "") if i < 0 else (line[:i], line[i:])


def _sub_each(code: str, pattern: str, repl: list[str]) -> Iterator[str]:
    """``code`` with one match of ``pattern`` replaced by each of ``repl`` (one match at a time)."""
    for m in re.finditer(pattern, code):
        for r in repl:
            if r != m.group(0):
                yield code[: m.start()] + r + code[m.end() :]


def _sized_literal_variants(lit: str) -> list[str]:
    m = re.fullmatch(r"(\d+)'([bd])(\d+)", lit)
    if not m:
        return []
    width, base, digits = int(m.group(1)), m.group(2), m.group(3)
    value = int(digits, 2 if base == "b" else 10)
    out = []
    for v in {value + 1, value - 1, value ^ 1}:
        if 0 <= v < 2**width and v != value:
            out.append(f"{width}'{base}{format(v, 'b') if base == 'b' else v}")
    return out


def _condition_span(code: str) -> tuple[int, int] | None:
    """Where the condition of an ``if (...)`` on this line lies (inside its parentheses)."""
    m = re.search(r"\bif \(", code)
    if not m:
        return None
    depth = 1
    for i in range(m.end(), len(code)):
        depth += code[i] == "("
        depth -= code[i] == ")"
        if depth == 0:
            return m.end(), i
    return None


_RESET_SWAP = {"M_INIT": "M_SPECULATE", "ST_OK": "ST_BAD_COUNT", "B_WAIT": "B_SPECULATE"}


def _line_mutants(code: str, in_reset: bool, in_always: bool, continued: bool = False) -> Iterator[tuple[str, str]]:
    """(operator, mutated code) for one line of code (comment removed); ``continued``: the line goes on a
    declaration of the line before."""
    stripped = code.strip()
    is_decl = continued or stripped.startswith(("wire", "reg", "localparam", "assign"))
    # operators
    for a, b in (("==", "!="), ("!=", "=="), ("&&", "||"), ("||", "&&")):
        for out in _sub_each(code, re.escape(a), [b]):
            yield "operator", out
    for out in _sub_each(code, r"(?<=[\w)\]}\s])\+(?=\s*[\w({])", ["-"]):
        yield "operator", out
    for out in _sub_each(code, r"(?<=[\w)\]}\s])-(?=\s*[\w({'])(?![^\[]*\])", ["+"]):
        yield "operator", out
    for out in _sub_each(code, r"!(?!=)", [""]):
        yield "operator", out
    # comparisons in expressions: every <=, <, >=, > of a declaration or inside an if's condition (never the
    # non-blocking assignment)
    span = (0, len(code)) if is_decl else _condition_span(code) if in_always else None
    if span is not None:
        for m in re.finditer(r"(?<![<>=!])(<=|>=|<|>)(?![<>=])", code[span[0] : span[1]]):
            i, j = span[0] + m.start(), span[0] + m.end()
            if not continued and (stripped.startswith("assign") or (is_decl and not stripped.startswith("wire"))):
                continue
            for r in ("<=", "<", ">=", ">"):
                if r != m.group(0):
                    yield "comparison", code[:i] + r + code[j:]
    # constants
    for m in re.finditer(r"\d+'[bd]\d+", code):
        for v in _sized_literal_variants(m.group(0)):
            yield ("reset" if in_reset else "constant"), code[: m.start()] + v + code[m.end() :]
    # conditions
    span = _condition_span(code) if in_always else None
    if span is not None:
        cond = code[span[0] : span[1]]
        for r in (f"!({cond})", "1'b1", "1'b0"):
            yield "condition", code[: span[0]] + r + code[span[1] :]
    # reset values: the all-zero vector resets take all ones
    if in_reset:
        for m in re.finditer(r"\{(PTR_W|ARG_W)\{1'b0\}\}", code):
            yield "reset", code[: m.start()] + "{" + m.group(1) + "{1'b1}}" + code[m.end() :]
        for name, other in _RESET_SWAP.items():
            for out in _sub_each(code, rf"\b{name}\b", [other]):
                yield "reset", out
    # widths of declarations
    if is_decl or stripped.startswith(("input", "output")):
        for m in re.finditer(r"\[(\w+)-1:0\]", code):
            yield "width", code[: m.start()] + f"[{m.group(1)}-2:0]" + code[m.end() :]
        for m in re.finditer(r"\[(\w+):0\]", code):
            w = m.group(1)
            narrower = f"[{int(w) - 1}:0]" if w.isdigit() else f"[{w}-1:0]"
            yield "width", code[: m.start()] + narrower + code[m.end() :]
    # statements
    if in_always and re.fullmatch(r"\s*\w+ <= [^;]+;\s*", code):
        yield "statement", re.sub(r"\S.*", "; // deleted", code)


def generate(reference: str | None = None) -> list[Mutant]:
    """Every mutant of the reference source, in line order, duplicates (same source) removed."""
    src = reference if reference is not None else REFERENCE_RTL.read_text()
    lines = src.split("\n")
    out: list[Mutant] = []
    seen: set[str] = set()
    body = False
    in_always = in_reset = continued = False
    for no, line in enumerate(lines, start=1):
        code, comment = _split_comment(line)
        if not body:
            body = code.strip() == ");"
            continue
        if code.strip().startswith("always"):
            in_always = True
        if in_always and "if (rst)" in code:
            in_reset = True
        elif in_reset and "end else" in code:
            in_reset = False
        if not code.strip() or code.strip() == "endmodule":
            continue
        for op, mutated in _line_mutants(code, in_reset, in_always, continued):
            new = mutated + comment
            if new == line:
                continue
            h = hashlib.sha1(f"{no}:{new}".encode()).hexdigest()[:8]
            if h in seen:
                continue
            seen.add(h)
            out.append(Mutant(f"m{no:03d}_{h}", op, no, line, new))
        stripped = code.strip()
        continued = (
            not in_always
            and not stripped.endswith(";")
            and (continued or stripped.startswith(("wire", "localparam", "assign")))
        )
    return out


@dataclass
class CampaignRow:
    ident: str
    operator: str
    line: int
    new: str
    outcome: str  # killed / survived / stillborn
    detail: str
    examples_run: int
    seconds: float


def run_one(
    mutant: Mutant, work: Path, examples: int, seed: int, simulator: str = "icarus", reference: str | None = None
) -> CampaignRow:
    """Build and verify one mutant (no shrinking)."""
    from fpga.kvmu.verify.session import RtlBuildError, RtlSession
    from fpga.kvmu.verify.verify import run_examples

    src = reference if reference is not None else REFERENCE_RTL.read_text()
    path = work / f"{mutant.ident}.v"
    path.write_text(mutant.source(src))
    t0 = time.monotonic()
    try:
        session = RtlSession([path], "kvmu", simulator)
        session.start()
    except RtlBuildError as e:
        return CampaignRow(
            mutant.ident,
            mutant.operator,
            mutant.line,
            mutant.new.strip(),
            "stillborn",
            str(e).splitlines()[0][:200],
            0,
            time.monotonic() - t0,
        )
    try:
        result = run_examples(session, examples, seed, shrink=False)
    finally:
        session.close()
    outcome = "survived" if result.passed else "killed"
    detail = "" if result.passed else result.message()[:300]
    return CampaignRow(
        mutant.ident,
        mutant.operator,
        mutant.line,
        mutant.new.strip(),
        outcome,
        detail,
        result.simulator_runs,
        time.monotonic() - t0,
    )


def run_campaign(
    out: Path,
    examples: int = 200,
    seed: int = 0,
    only: list[str] | None = None,
    every: int = 1,
    simulator: str = "icarus",
) -> list[CampaignRow]:
    """Run the mutants (``only`` these idents, or every ``every``-th) and append one JSON line per mutant to
    ``out``; mutants already in ``out`` are skipped, so an interrupted campaign resumes."""
    out = Path(out)
    done = {}
    if out.exists():
        for ln in out.read_text().splitlines():
            row = json.loads(ln)
            done[row["ident"]] = CampaignRow(**row)
    work = out.parent / (out.stem + "_rtl")
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for i, m in enumerate(generate()):
        if (only is not None and m.ident not in only) or (only is None and i % every):
            continue
        if m.ident in done:
            rows.append(done[m.ident])
            continue
        row = run_one(m, work, examples, seed, simulator)
        with out.open("a") as f:
            f.write(json.dumps(asdict(row)) + "\n")
        rows.append(row)
    return rows


def summary(rows: list[CampaignRow]) -> dict[str, object]:
    live = [r for r in rows if r.outcome != "stillborn"]
    killed = sum(r.outcome == "killed" for r in live)
    return {
        "mutants": len(rows),
        "stillborn": len(rows) - len(live),
        "killed": killed,
        "survived": [r.ident for r in live if r.outcome == "survived"],
        "kill_rate": killed / len(live) if live else 1.0,
    }


if __name__ == "__main__":  # pragma: no cover - the campaign entry point (docs/kvmu.md)
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--examples", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    rs = run_campaign(a.out, a.examples, a.seed, a.only, a.every)
    print(json.dumps(summary(rs), indent=1))
