"""`tools/gpu-check`: every default scenario on one CUDA device, plus the core sampler and likelihood timings, in one
results folder, on a machine with no uv and no network.

    tools/gpu-check --out results/gpu            # on the GPU machine: python3 with its own torch, no install step
    tools/gpu-check --only vision.gendr_pix      # the scenarios matching a pattern, as `flowlab bench --only`
    tools/gpu-check --bundle                     # here: gpu-bundle/, wheels of what such a machine lacks (<= 60 MB)

The wrapper puts every member's `src/` on PYTHONPATH, so scenarios are found from the members' pyproject.toml files
(entry points need an install). Wheels in `--wheels` (default: gpu-bundle/ when present) are unpacked into a
temporary folder placed after the machine's own site-packages, so they only fill gaps. A scenario whose package is
still missing is skipped with the package named. Scenarios start cheapest first; none starts once `--budget`
seconds have passed, so the whole check ends within about 8 minutes. results.jsonl gains each record as it ends,
so a check cut short keeps what it did. This module needs only the standard library until it imports the runner
(which needs torch and matplotlib, and markdown-it-py for report.html).
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import sys
import tempfile
import time
import zipfile
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[4]
#: what a bare GPU machine (torch, numpy, scipy, scikit-learn, scikit-image, torch-geometric, torchdiffeq,
#: transformers, peft) lacks and the default scenarios import, small enough to carry
BUNDLE = (
    "diffusers",
    "markdown-it-py",
    "mdurl",
    "gymnasium",
    "farama-notifications",
    "cloudpickle",
    "anndata",
    "array-api-compat",
    "natsort",
    "legacy-api-wrap",
    "scverse-misc",
    "pot",
)
BUNDLE_LIMIT_MB = 60.0
ALWAYS = ("core.sampler_overhead", "core.likelihood")
_ENTRY = re.compile(r'^\s*\w+\s*=\s*"([\w.]+):(\w+)"', re.M)


def build_bundle(folder: Path, names: tuple[str, ...] = BUNDLE, limit_mb: float = BUNDLE_LIMIT_MB) -> list[Path]:
    """Re-pack each installed distribution of `names` (from this environment) as a wheel into `folder`, skipping
    any that would take the folder past `limit_mb`; returns the wheels written."""
    folder.mkdir(parents=True, exist_ok=True)
    written, total = [], 0.0
    for name in names:
        dist = metadata.distribution(name)
        base = Path(str(dist.locate_file("")))
        tags = [
            ln.split(":", 1)[1].strip() for ln in (dist.read_text("WHEEL") or "").splitlines() if ln.startswith("Tag:")
        ]
        wheel = folder / f"{dist.metadata['Name'].replace('-', '_')}-{dist.version}-{(tags or ['py3-none-any'])[0]}.whl"
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
            for rel in dist.files or []:
                path = base / rel
                if ".." in rel.parts or "__pycache__" in rel.parts or not path.is_file():
                    continue
                zf.write(path, str(rel))
        size = wheel.stat().st_size / 2**20
        if total + size > limit_mb:
            wheel.unlink()
            print(f"skipped {name}: {size:.1f} MB would pass the {limit_mb:.0f} MB limit", flush=True)
            continue
        total += size
        written.append(wheel)
        print(f"{wheel.name}: {size:.1f} MB", flush=True)
        if not wheel.name.endswith("-none-any.whl"):
            print(f"  {name} is compiled for this Python ({sys.version_info.major}.{sys.version_info.minor}): for a "
                  "machine with another, replace it by `pip download --no-deps --only-binary=:all: --python-version "
                  f"X.Y --platform manylinux_2_28_x86_64 {name}=={dist.version}`", flush=True)  # fmt: skip
    print(f"{len(written)} wheel(s), {total:.1f} MB in {folder}", flush=True)
    return written


def use_wheels(folder: Path) -> list[str]:
    """Unpack every wheel in `folder` into a temporary folder appended to sys.path; returns the distributions."""
    wheels = sorted(folder.glob("*.whl"))
    if not wheels:
        return []
    target = Path(tempfile.mkdtemp(prefix="gpu-check-wheels-"))
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(target)
    sys.path.append(str(target))
    importlib.invalidate_caches()
    return [w.name.split("-")[0] for w in wheels]


def scenarios_from_sources(root: Path = ROOT) -> tuple[list[Any], dict[str, str]]:
    """Every member's scenarios, found through the `flowlab.benchmarks` entry of its pyproject.toml; a package
    that fails to import is returned as (entry name -> the missing module or the error)."""
    found, failures = [], {}
    for pyproject in [*sorted(root.glob("packages/*/pyproject.toml")), root / "tools" / "pyproject.toml"]:
        text = pyproject.read_text()
        section = text.split('[project.entry-points."flowlab.benchmarks"]', 1)
        if len(section) < 2:
            continue
        body = section[1].split("\n[", 1)[0]
        for module, attr in _ENTRY.findall(body):
            try:
                found.extend(getattr(importlib.import_module(module), attr))
            except ModuleNotFoundError as err:
                failures[module] = f"missing package {err.name!r}"
            except Exception as err:  # a broken package must not hide the others
                failures[module] = f"{type(err).__name__}: {err}"
    return found, failures


def _missing(message: str) -> str | None:
    match = re.match(r"ModuleNotFoundError: No module named '([\w.]+)'", message or "")
    return match.group(1) if match else None


def main(argv: list[str] | None = None) -> int:
    """tools/gpu-check: with --bundle, write the wheels and stop; otherwise run the chosen scenarios cheapest first
    within --budget and write results.jsonl and the report to --out. Exit status 1 when a scenario errored."""
    parser = argparse.ArgumentParser(prog="gpu-check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--bundle", type=Path, nargs="?", const=ROOT / "gpu-bundle", help="build the wheels here")
    parser.add_argument("--out", type=Path, help="results folder (default results/gpu-check-<time>)")
    parser.add_argument("--wheels", type=Path, default=ROOT / "gpu-bundle", help="a folder of wheels to use")
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu for a dry check")
    parser.add_argument("--suite", default="default", help="default (the headline cases), smoke or quick")
    parser.add_argument("--budget", type=float, default=420.0, help="no scenario but the first starts after this")
    parser.add_argument("--data", type=Path, default=None, help="the datasets root (default $FLOWLAB_DATA)")
    parser.add_argument("--only", action="append", help="scenario name, dotted prefix, substring or glob (repeatable)")
    args = parser.parse_args(argv)
    if args.bundle is not None:
        build_bundle(args.bundle)
        return 0
    start = time.perf_counter()
    extra = use_wheels(args.wheels) if args.wheels.is_dir() else []
    import torch

    from flowlab.core.bench import SUITES
    from flowlab.datasets import root as data_root
    from flowlab.tools.bench.case import Record, run_one
    from flowlab.tools.bench.discovery import SelectionError, select
    from flowlab.tools.bench.report import write_report
    from flowlab.tools.bench.runner import build_artifact, required_artifacts

    if args.suite not in SUITES or args.suite == "full":
        parser.error(f"--suite: expected default, smoke or quick, got {args.suite!r}")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: torch sees no CUDA device here")
    variant = SUITES[args.suite]
    scenarios, failures = scenarios_from_sources()
    if args.only:
        try:
            chosen = select(scenarios, args.only, args.suite)
        except SelectionError as err:
            parser.error(f"--only: {err}")
    else:
        chosen = [s for s in scenarios if (s.headline if args.suite == "default" else True) or s.name in ALWAYS]
    chosen.sort(key=lambda s: s.expected(variant))
    out = args.out or ROOT / "results" / datetime.now().strftime("gpu-check-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    data = args.data or data_root(required=False)
    records: list[Record] = []
    print(f"gpu-check on {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}), "
          f"torch {torch.__version__}, {len(chosen)} scenario(s), wheels: {extra or 'none'}", flush=True)  # fmt: skip
    for module, why in failures.items():
        print(f"skipped every scenario of {module}: {why}", flush=True)
    built: set[str] = set()
    log = (out / "results.jsonl").open("w")  # one line per record as it ends: a run cut short keeps what it did

    def keep(rec: Record) -> None:
        records.append(rec)
        log.write(json.dumps(rec.to_json()) + "\n")
        log.flush()

    for s in chosen:
        if records and time.perf_counter() - start > args.budget:
            rec = Record(name=s.name, package=s.package, method=s.method, variant=variant, seed=0, status="skipped",
                         message=f"skipped: the {args.budget:.0f} s budget was spent")  # fmt: skip
        else:
            for artifact in required_artifacts([s], variant, device):
                if artifact.key() not in built:
                    built.add(artifact.key())
                    keep(build_artifact(artifact))
                    print(f"artifact {artifact.name}: {records[-1].message}", flush=True)
            rec = run_one(s, seed=0, variant=variant, device=device, out_dir=out, data_root=data)
            missing = _missing(rec.message) if rec.status == "error" else None
            if missing:
                rec.status, rec.message = "skipped", f"skipped: missing package {missing!r}"
        keep(rec)
        print(f"{s.name}: {rec.status} {rec.wall_seconds:.1f} s {rec.message}", flush=True)
    log.close()
    (out / "skipped_packages.json").write_text(json.dumps(failures, indent=1))
    report = write_report([r.to_json() for r in records], out, suite=args.suite)
    print(f"wrote {out / 'results.jsonl'} and {report} in {time.perf_counter() - start:.0f} s", flush=True)
    return 1 if any(r.status == "error" for r in records) else 0


if __name__ == "__main__":
    sys.exit(main())
