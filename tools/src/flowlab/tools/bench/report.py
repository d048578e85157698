"""Render results.jsonl into report.md and report.html: first one row per method (its headline metric, ours against
the best baseline and the paper, whether the claim held), then the artifacts built, then a table per package (ours
beside every baseline and the papers) with PNG plots."""

from __future__ import annotations

import json
import math
import os
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from statistics import mean, stdev
from typing import Any

from flowlab.core.bench import figure
from flowlab.tools.bench.html import write_html

PACKAGE_TITLES = {
    "core": "flowlab.core",
    "vision": "flowlab.vision_gen",
    "mol": "flowlab.molecular",
    "rl": "flowlab.rl_control",
    "bio": "flowlab.biology_dynamics",
    "crowd": "flowlab.crowd_sim",
    "trust": "flowlab.trust_ood",
}
_ARROW = {"min": " ↓", "max": " ↑"}
MAX_PLOTTED_METRICS = 8


def load_records(folder: Path) -> list[dict[str, Any]]:
    """The records of folder/results.jsonl, one JSON object a line; FileNotFoundError without the file, ValueError
    when it is corrupt or holds no benchmark records."""
    path = Path(folder) / "results.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"no results.jsonl in {folder}")
    try:
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ValueError(f"{path} is corrupt: not one JSON record per line") from None
    if not records or not all(isinstance(r, dict) and {"name", "seed", "status"} <= set(r) for r in records):
        raise ValueError(f"{path} holds no benchmark records (empty, or lines without name, seed and status)")
    return records


def _present(values: Sequence[float]) -> list[float]:
    """The values a seed reported (None and NaN dropped); inf stays (e.g. an NLL where the model's density is 0)."""
    return [v for v in values if v is not None and not math.isnan(v)]


def _fmt(values: Sequence[float]) -> str:
    vals = _present(values)
    if not vals:
        return "–"
    m = mean(vals)
    text = f"{m:.4g}"
    if len(vals) > 1 and all(math.isfinite(v) for v in vals):  # an inf value has no spread
        text += f" ± {stdev(vals):.2g}"
    return text


def _group(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_name: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        by_name[rec["name"]].append(rec)
    return by_name


def _rows(recs: list[dict[str, Any]]) -> tuple[list[str], list[tuple[str, dict[str, list[float]]]]]:
    """Metric names and rows (label, metric -> values over seeds) for ours, baselines and references."""
    ok = [r for r in recs if r["status"] == "ok"]
    metrics: list[str] = []
    for r in ok:
        for source in [r["metrics"], *r["baselines"].values(), *r["references"].values()]:
            metrics += [k for k in source if k not in metrics]
    rows: list[tuple[str, dict[str, list[float]]]] = []
    ours: dict[str, list[float]] = defaultdict(list)
    baselines: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    refs: dict[str, dict[str, float]] = {}
    for r in ok:
        for k, v in r["metrics"].items():
            ours[k].append(v)
        for b, vals in r["baselines"].items():
            for k, v in vals.items():
                baselines[b][k].append(v)
        refs.update(r["references"])
    rows.append((f"**{ok[0]['method'] if ok else 'ours'}** (ours)", ours))
    rows += [(f"{b} (baseline)", vals) for b, vals in baselines.items()]
    rows += [(f"{ref} (published)", {k: [v] for k, v in vals.items()}) for ref, vals in refs.items()]
    return metrics, rows


def _plot(name: str, metrics: list[str], rows, directions: dict[str, str], path: Path) -> Path | None:
    shown = [m for m in metrics if any(vals.get(m) for _, vals in rows)][:MAX_PLOTTED_METRICS]
    if not shown:
        return None
    cols = min(4, len(shown))
    nrows = math.ceil(len(shown) / cols)
    with figure(path, ncols=cols, nrows=nrows, size=(3.6 * cols, 2.9 * nrows), dpi=110, squeeze=False) as (fig, axes):
        for ax, metric in zip(axes.flat, shown):
            labels, heights, errs = [], [], []
            for label, vals in rows:
                v = _present(vals.get(metric, []))
                if v and all(math.isfinite(x) for x in v):  # an inf mean has no bar; the table shows it
                    labels.append(label.replace("**", "").replace(" (ours)", "\n(ours)").replace(" (baseline)", ""))
                    heights.append(mean(v))
                    errs.append(stdev(v) if len(v) > 1 else 0.0)
            colors = ["tab:blue"] + ["tab:gray"] * (len(labels) - 1)
            ax.bar(range(len(labels)), heights, yerr=errs, color=colors)
            ax.set_xticks(range(len(labels)), labels, rotation=35, ha="right", fontsize=7)
            if heights and min(heights) > 0 and max(heights) / min(heights) > 100:
                ax.set_yscale("log")
            ax.set_title(metric + _ARROW.get(directions.get(metric, ""), ""), fontsize=9)
        for ax in list(axes.flat)[len(shown) :]:
            ax.axis("off")
        fig.suptitle(name, fontsize=10)
    return path


def _plot_curve(name: str, curve: dict[str, Any], path: Path) -> Path:
    with figure(path, dpi=110) as (_, ax):
        for label, (xs, ys) in curve["lines"].items():
            ax.plot(xs, ys, marker="o", markersize=3, label=label)
        ax.set_xscale("log" if curve.get("logx") else "linear")
        ax.set_yscale("log" if curve.get("logy") else "linear")
        ax.set_xlabel(curve["xlabel"])
        ax.set_ylabel(curve["ylabel"])
        ax.set_title(f"{name}: {curve['title']}", fontsize=9)
        ax.legend(fontsize=7)
    return path


def _best_baseline(recs: list[dict[str, Any]], metric: str, direction: str | None) -> tuple[str, list[float]] | None:
    """The baseline with the best mean of `metric` (by `direction`; min when unknown) and its values."""
    values: dict[str, list[float]] = defaultdict(list)
    for r in recs:
        for b, vals in r["baselines"].items():
            if metric in vals and vals[metric] is not None and math.isfinite(vals[metric]):
                values[b].append(vals[metric])
    if not values:
        return None
    pick = max if direction == "max" else min
    name = pick(values, key=lambda b: mean(values[b]))
    return name, values[name]


def _headline_rows(by_name: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The report's first table: per method, its headline scenario (or else its first scenario with a claim)."""
    per_method: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for recs in by_name.values():
        ok = [r for r in recs if r["status"] == "ok" and r.get("claim")]
        if not ok:
            continue
        key = (ok[0]["package"], ok[0]["method"])
        if key not in per_method or (ok[0].get("headline") and not per_method[key][0].get("headline")):
            per_method[key] = ok
    if not per_method:
        return []
    lines = [
        "## Headline: one row per method",
        "",
        "| method | scenario | metric | ours | best baseline | paper | claim | held |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (_, method), recs in sorted(per_method.items(), key=lambda kv: _package_order(kv[0][0])):
        claim = recs[0]["claim"]
        metric = claim["metric"]
        ours = _fmt([r["metrics"].get(metric) for r in recs])
        best = _best_baseline(recs, metric, recs[0].get("directions", {}).get(metric))
        best_text = f"{_fmt(best[1])} ({best[0]})" if best else "–"
        papers = [(ref, vals[metric]) for ref, vals in recs[0]["references"].items() if metric in vals]
        paper = f"{papers[0][1]:.4g} ({papers[0][0]})" if papers else "–"
        held = [r["claim"]["held"] for r in recs if r["claim"]["held"] is not None]
        verdict = f"{sum(held)}/{len(held)} seeds" if held else "–"
        name = recs[0]["name"]
        lines.append(
            f"| {method} | `{name}` | {metric} | {ours} | {best_text} | {paper} | {claim['text']} | {verdict} |"
        )
    return [*lines, ""]


def _package_order(package: str) -> int:
    return list(PACKAGE_TITLES).index(package) if package in PACKAGE_TITLES else 99


def write_report(
    records: list[dict[str, Any]],
    folder: Path,
    *,
    suite: str | None = None,
    title: str = "FlowLab benchmark report",
    elapsed: float | None = None,
) -> Path:
    """Write report.md, report.html and plots/<scenario>.png into `folder`; return the report.md path. `elapsed`: the
    run's wall-clock seconds from plan to last row (artifacts build side by side, so it is less than the sum)."""
    folder = Path(folder)
    builds = [r for r in records if r.get("kind") == "artifact"]
    records = [r for r in records if r.get("kind", "scenario") == "scenario"]
    by_name = _group(records)
    lines = [f"# {title}", ""]
    if records:
        first = records[0]
        lines += [
            f"- suite: `{suite or first['variant']}` ({first['variant']} variants); device: `{first['device']}`; "
            f"git: `{first.get('git_commit')}`",
            f"- scenarios: {len(by_name)}; records: {len(records)}; "
            + ", ".join(f"{s}: {sum(r['status'] == s for r in records)}" for s in ("ok", "skipped", "error")),
            f"- wall time: {'' if elapsed is None else f'{elapsed:.0f} s elapsed; '}"
            f"{sum(r['wall_seconds'] for r in records) + sum(r['wall_seconds'] for r in builds):.0f} s of scenarios "
            "and artifact builds summed",
            "",
        ]
    lines += _headline_rows(by_name)
    if builds:
        built = sum(r["message"].startswith("built") for r in builds)
        lines += [f"## Artifacts: {built} built, {len(builds) - built} reused from the cache", "",
                  "| artifact | status | seconds | entry |", "|---|---|---|---|"]  # fmt: skip
        for r in builds:
            lines.append(f"| `{r['name']}` | {r['status']}: {r['message']} | {r['wall_seconds']:.1f} | "
                         f"{r['config'].get('path', '–')} |")  # fmt: skip
        lines.append("")
    by_package: dict[str, list[str]] = defaultdict(list)
    for name, recs in by_name.items():
        by_package[recs[0]["package"]].append(name)
    for package in sorted(by_package, key=_package_order):
        lines += [f"## {PACKAGE_TITLES.get(package, package)}", ""]
        for name in by_package[package]:
            lines += _scenario_section(name, by_name[name], folder)
    text = "\n".join(lines) + "\n"
    report = folder / "report.md"
    report.write_text(text)
    write_html(text, folder, title=title)
    return report


def _scenario_section(name: str, recs: list[dict[str, Any]], folder: Path) -> list[str]:
    seeds = sorted(r["seed"] for r in recs)
    wall = sum(r["wall_seconds"] for r in recs)
    peak = max(r["peak_rss_mb"] for r in recs)
    lines = [f"### `{name}`", "", f"seeds {seeds}, {wall:.1f} s wall in total, peak RSS {peak:.0f} MB", ""]
    for r in recs:
        if r["status"] != "ok":
            lines.append(f"- seed {r['seed']}: **{r['status']}**: {r['message']}")
    if any(r["status"] != "ok" for r in recs):
        lines.append("")
    metrics, rows = _rows(recs)
    if not metrics:
        return lines
    directions = recs[0].get("directions", {})
    header = ["method", *(m + _ARROW.get(directions.get(m, ""), "") for m in metrics)]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for label, vals in rows:
        lines.append("| " + " | ".join([label, *(_fmt(vals.get(m, [])) for m in metrics)]) + " |")
    lines.append("")
    plot = _plot(name, metrics, rows, directions, folder / "plots" / f"{name}.png")
    if plot is not None:
        lines += [f"![{name}](plots/{plot.name})", ""]
    first_ok = next((r for r in recs if r["status"] == "ok"), None)
    for i, curve in enumerate(first_ok.get("curves", []) if first_ok else []):
        png = _plot_curve(name, curve, folder / "plots" / f"{name}.curve{i}.png")
        lines += [f"![{curve['title']}](plots/{png.name})", ""]
    extra = [p for r in recs for p in r.get("plots", [])]
    for p in extra[:4]:
        rel = os.path.relpath(p, folder)
        lines += [f"![{Path(p).stem}]({rel})", ""]
    return lines
