#!/usr/bin/env python3
"""The current tables of docs/BENCHMARKS.md, made from the JSON that `superpoint-rt bench --json` writes.

    python3 bench/tables.py docs/bench/*.json                 print the tables (Markdown)
    python3 bench/tables.py --update docs/BENCHMARKS.md docs/bench/*.json
                                                              replace the text between the two markers
    python3 bench/tables.py --check docs/BENCHMARKS.md docs/bench/*.json
                                                              exit 1 when the file's tables are not these

One table per kind of CPU: the CPU's model name and the units the run had (after the SUPERPOINT_RT_ISA cap, which
the bench JSON records in cpu_units: a machine capped to AVX2 is its own kind, and its heading says so). Where several
files measured the same kind, the newest one gives the table. Every cell is a median (p50) of that run; ratios
compare rows of the same run and thread count (the machine is shared, so only side-by-side figures are compared).
Standard library only.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys

BEGIN = "<!-- bench/tables.py: begin (generated from docs/bench/*.json; do not edit by hand) -->"
END = "<!-- bench/tables.py: end -->"


def units_text(u: dict) -> str:
    names = [("avx2", "AVX2"), ("fma", "FMA"), ("avx512", "AVX-512"), ("avx512_vnni", "VNNI"),
             ("avx512_bf16", "AVX512-BF16"), ("amx", "AMX")]
    have = [n for k, n in names if u.get(k)]
    lack = [n for k, n in names if not u.get(k)]
    return " + ".join(have) if have else "no AVX2" + ("" if not lack else f" (no {', '.join(lack)})")


def kind_of(doc: dict) -> tuple[str, str]:
    u = doc.get("cpu_units", {})
    return doc.get("cpu", "unknown CPU"), units_text(u)


def cell(x, digits=1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return f"{x:.{digits}f}"


def p50(row: dict, kind: str):
    v = row.get(kind)
    return v.get("p50") if isinstance(v, dict) else None


def cap_text(doc: dict) -> str:
    """How the run was capped: SUPERPOINT_RT_ISA (ours and oneDNN only) or scripts/as-cpu.sh (CPUID itself, for
    every engine in the run)."""
    if doc.get("cpuid_cap"):
        return f" (CPUID capped for every engine: scripts/as-cpu.sh {doc['cpuid_cap']})"
    if doc.get("isa_cap"):
        return f" (capped: SUPERPOINT_RT_ISA={doc['isa_cap']})"
    return ""


def table(doc: dict, source: str) -> str:
    cpu, units = kind_of(doc)
    lines = [f"### {cpu}: {units}{cap_text(doc)}", "",
             f"`docs/bench/{source}`, {doc.get('date', '?')}; {doc.get('rounds', '?')} interleaved rounds x "
             f"{doc.get('iters', '?')} iterations; fastest precision here: {doc.get('fastest_precision', '?')}.", ""]
    lines += ["| threads | row | forward p50 ms | x ONNX Runtime | x OpenVINO | JPEG request p50 ms | x forward | "
              "peak RSS MB (forward / request) | error vs float64 (scores / descriptors) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in doc.get("rows", []):
        fwd = p50(r, "forward")
        jpeg = p50(r, "jpeg")
        err = r.get("error_vs_float64")
        err_text = f"{err['scores']:.1e} / {err['descriptors']:.1e}" if isinstance(err, dict) else "-"
        lines.append(
            f"| {r.get('threads')} | {r.get('row')} | {cell(fwd)} | {cell(r.get('forward_vs_ort'), 3)} | "
            f"{cell(r.get('forward_vs_openvino'), 3)} | {cell(jpeg)} | "
            f"{cell(jpeg / fwd if jpeg and fwd else None, 3)} | {cell(r.get('peak_rss_mb_forward'), 0)} / "
            f"{cell(r.get('peak_rss_mb_request'), 0)} | {err_text} |")
    return "\n".join(lines)


def tables(paths: list[str]) -> str:
    newest: dict[tuple[str, str, str, str], tuple[str, dict, str]] = {}
    for p in paths:
        doc = json.loads(pathlib.Path(p).read_text())
        key = (*kind_of(doc), doc.get("isa_cap") or "", doc.get("cpuid_cap") or "")
        date = doc.get("date", "")
        if key not in newest or date > newest[key][0]:
            newest[key] = (date, doc, pathlib.Path(p).name)
    if not newest:
        return "No bench JSON given."
    return "\n\n".join(table(doc, src) for _, doc, src in (newest[k] for k in sorted(newest)))


def replace_between(text: str, body: str) -> str:
    if BEGIN not in text or END not in text:
        raise SystemExit(f"tables.py: the markers are missing:\n{BEGIN}\n{END}")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{body}\n{END}{tail}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--update", metavar="MD", help="rewrite the tables in this Markdown file")
    g.add_argument("--check", metavar="MD", help="exit 1 when this Markdown file's tables differ")
    ap.add_argument("json", nargs="+", help="bench JSON files (superpoint-rt bench --json)")
    a = ap.parse_args()
    body = tables(a.json)
    if a.update or a.check:
        path = pathlib.Path(a.update or a.check)
        text = path.read_text()
        new = replace_between(text, body)
        if a.check:
            if new != text:
                print(f"tables.py: {path}'s tables are not those of {' '.join(a.json)}: run with --update",
                      file=sys.stderr)
                return 1
            return 0
        path.write_text(new)
        return 0
    print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
