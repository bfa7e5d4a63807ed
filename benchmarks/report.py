"""One report from every benchmark's saved figures: ``REPORT.md``, ``REPORT.json`` and ``freshness.png``.

``make bench`` runs every benchmark (each saves ``results/<name>.json``, see ``results.py``) and then this
script. It can run alone to rebuild the report from the saved results; a benchmark run again replaces its
own section only.

    .venv/bin/python benchmarks/report.py
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from statistics import median
from typing import Any

from results import RESULTS, need

HERE = Path(__file__).resolve().parent
ORDER = ["profile_pipeline", "bronze_ingest", "freshness", "freshness_every_hour", "gold_batches",
         "view_state", "cdc_merge", "growth_cdc", "growth_gold", "quality", "compaction", "restart",
         "sdp_orders", "storage_s3", "cluster"]
COLOURS = {"deltaflow": "tab:blue", "hand-written": "tab:orange"}


def load() -> list[dict[str, Any]]:
    saved = {p.stem: json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))}
    names = [n for n in ORDER if n in saved] + sorted(set(saved) - set(ORDER))
    return [saved[n] for n in names]


def number(value: float) -> str:
    if value >= 1000:
        return f"{value:,.0f}"
    return f"{value:.2f}" if value >= 1 else f"{value:.3f}"


def spread(samples: list[float]) -> str:
    if len(samples) < 2:
        return ""
    return f" ({number(min(samples))}–{number(max(samples))})"


def verdict(figure: dict[str, Any]) -> str:
    if figure["met"] is None:
        return "–"
    return "met" if figure["met"] else "**not met**"


def advantage(figure: dict[str, Any]) -> str:
    return f"{'< ' if figure.get('upper_bound') else ''}{figure['advantage']:.2f}×"


def target(figure: dict[str, Any]) -> str:
    if figure["target"] is None:
        return "–"
    return f"≥ {figure['target']:.2f}×" + (f" ({figure['target_text']})" if figure["target_text"] else "")


def summary(results: list[dict[str, Any]]) -> list[str]:
    lines = ["| benchmark | what | deltaflow | against | advantage | target | met |",
             "|---|---|---:|---|---:|---|---|"]
    for result in results:
        for f in result["figures"]:
            lines.append(f"| [{result['name']}](#{result['name']}) | {f['what']} | "
                         f"{number(median(f['deltaflow']))} {f['unit']} | {f['against']}: "
                         f"{number(median(f['baseline']))} {f['unit']} | {advantage(f)} | {target(f)} "
                         f"| {verdict(f)} |")
    return lines


def section(result: dict[str, Any]) -> list[str]:
    lines = [f"## {result['name']}", "", f"{result['title']}", "",
             f"`{result['command']}`, finished {result['finished']} on {result['machine']}; "
             f"{result['versions']}.", "",
             "| what | deltaflow, median (spread) | baseline, median (spread) | advantage | target |",
             "|---|---:|---:|---:|---|"]
    for f in result["figures"]:
        ours, theirs = f["deltaflow"], f["baseline"]
        lines.append(f"| {f['what']} | {number(median(ours))}{spread(ours)} {f['unit']} | {f['against']}: "
                     f"{number(median(theirs))}{spread(theirs)} {f['unit']} | {advantage(f)} | "
                     f"{target(f)} {verdict(f) if f['met'] is not None else ''} |")
    notes = list(dict.fromkeys(f"- {f['what']}: {f['note']}" for f in result["figures"] if f["note"]))
    notes += [f"- {note}" for note in result["notes"]]
    if notes:
        lines += ["", *notes]
    if result["name"] == "freshness" and (HERE / "freshness.png").exists():
        lines += ["", "![freshness distributions](freshness.png)"]
    return [*lines, ""]


def chart(results: list[dict[str, Any]]) -> Path | None:
    """The freshness distributions (one panel per input rate, one curve per contestant) as a PNG."""
    cells = next((r["data"].get("cells", []) for r in results if r["name"] == "freshness"), [])
    cells = [c for c in cells if c["freshness"] and c["triggers"].startswith("0 s")]
    if not cells:
        return None
    need("matplotlib", "the freshness chart")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fractions = sorted({c["fraction"] for c in cells})
    figure, axes = plt.subplots(1, len(fractions), figsize=(6 * len(fractions), 4), squeeze=False)
    for axis, fraction in zip(axes[0], fractions, strict=True):
        for cell in sorted((c for c in cells if c["fraction"] == fraction), key=lambda c: c["contestant"]):
            values = sorted(cell["freshness"] + cell["unseen"])
            shares = [(i + 1) / len(values) for i in range(len(values))]
            unseen = f", {len(cell['unseen'])} not seen: counted at their wait" if cell["unseen"] else ""
            axis.step(values, shares, where="post", color=COLOURS.get(cell["contestant"]),
                      label=f"{cell['contestant']} (n={len(values)}{unseen})")
        rate = next(c["rate"] for c in cells if c["fraction"] == fraction)
        axis.set_title(f"{fraction:.0%} of the base rate ({rate:,.0f} events/s), trigger 0")
        axis.set_xlabel("freshness: produce → visible in gold (s)")
        axis.set_ylabel("share of probes")
        axis.set_xlim(left=0)
        axis.grid(alpha=0.3)
        axis.legend(loc="lower right")
    figure.tight_layout()
    path = HERE / "freshness.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def main() -> None:
    results = load()
    if not results:
        raise SystemExit(f"no saved results in {RESULTS}: run a benchmark first (make bench)")
    png = chart(results)
    met = [f["met"] for r in results for f in r["figures"] if f["met"] is not None]
    lines = [
        "# Benchmark report",
        "",
        f"Generated {datetime.now(UTC).isoformat(timespec='seconds')} by `make bench` "
        "(`benchmarks/report.py` over `benchmarks/results/*.json`); do not edit by hand. Every figure is "
        "deltaflow against the job it replaces, measured in the same run on the same machine; each script's "
        "docstring says in which order its contestants run and which warm-up it discards (every one "
        "alternates or rotates the order). Timings are never assertions in the test suite: the exactness "
        "checks are.",
        "",
        "**advantage** = how many times better deltaflow does than the baseline, whichever way the unit "
        "points (above 1: deltaflow better; for times, baseline ÷ deltaflow; for rates, deltaflow ÷ "
        "baseline). **target** = the advantage the issues ask for (14; 39 for the figures against the exact "
        f"hand-written jobs). {sum(met)} of {len(met)} targets met.",
        "",
        *summary(results),
        "",
        *[line for result in results for line in section(result)],
    ]
    (HERE / "REPORT.md").write_text("\n".join(lines))
    (HERE / "REPORT.json").write_text(json.dumps({"benchmarks": results}, indent=1) + "\n")
    print(f"wrote {HERE / 'REPORT.md'}, REPORT.json" + (f", {png.name}" if png else ""))


if __name__ == "__main__":
    main()
