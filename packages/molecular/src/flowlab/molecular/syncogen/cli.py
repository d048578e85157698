"""`flowlab molecular syncogen build-space|train|generate|evaluate`: build the mini SynSpace (cached artifact),
train SynCoGen (or an ablation, or the atom-level baseline) on it, generate molecules as SDF with their synthesis
routes, and score a trained run.

The vocabulary is `$FLOWLAB_DATA/syncogen_vocabulary` (`--data-root`) or a user's folder of the same layout
(`--vocabulary`); an invalid SMILES or SMARTS in it is reported naming the file and the entry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from flowlab.core.cli import OVERWRITE_HELP, RESUME_HELP, SEEDS, choice_option, claim_run_option, device_option
from flowlab.molecular.syncogen.names import VARIANTS

app = typer.Typer(help="SynCoGen: synthesizable 3-D molecules from building blocks, reactions and coordinates.",
                  no_args_is_help=True)  # fmt: skip

_VOCAB_HELP = "A vocabulary folder (building_blocks.json, reactions.json, meta.json); default: the shipped one."
VocabOption = Annotated[Path | None, typer.Option(help=_VOCAB_HELP)]
DataRootOption = Annotated[
    str | None, typer.Option(envvar="FLOWLAB_DATA", help="Data root holding syncogen_vocabulary.")
]


def _vocab_folder(vocabulary: Path | None, data_root: str | None) -> Path:
    """The vocabulary folder, loaded once to check it; errors name --vocabulary (or --data-root)."""
    from flowlab.molecular.syncogen.vocabulary import DATASET, load_vocabulary

    option = "--vocabulary" if vocabulary is not None else "--data-root"
    if vocabulary is None:
        if not data_root:
            raise typer.BadParameter("FLOWLAB_DATA is not set; give --data-root or --vocabulary", param_hint=option)
        vocabulary = Path(data_root) / DATASET
    try:
        load_vocabulary(vocabulary)
    except (ValueError, FileNotFoundError) as err:
        raise typer.BadParameter(str(err), param_hint=option) from err
    return vocabulary.resolve()


def _positive(value: int, option: str, low: int = 1, high: int | None = None) -> None:
    if value < low or (high is not None and value > high):
        bound = f"{low}..{high}" if high is not None else f">= {low}"
        raise typer.BadParameter(f"expected {bound}, got {value}", param_hint=option)


def _space_config(n_molecules: int, max_blocks: int, conformers: int, seed: int, workers: int):
    from flowlab.molecular.syncogen.space import SpaceConfig

    _positive(n_molecules, "--n-molecules", 10)
    _positive(max_blocks, "--max-blocks", 2, 4)
    _positive(conformers, "--conformers", 1, 10)
    _positive(workers, "--workers", 1, 64)
    return SpaceConfig(n_molecules=n_molecules, max_blocks=max_blocks, n_conformers=conformers, seed=seed % 2**31,
                       workers=workers)  # fmt: skip


@app.command("build-space")
def build_space(
    n_molecules: Annotated[int, typer.Option(help="Distinct products to keep.")] = 2000,
    max_blocks: Annotated[int, typer.Option(help="Building blocks per molecule: 2..max (<= 4).")] = 3,
    conformers: Annotated[int, typer.Option(help="ETKDGv3 + MMFF94 conformers per molecule.")] = 1,
    seed: Annotated[int, typer.Option(min=0, help="Seed of the random assemblies and conformers.")] = 0,
    workers: Annotated[int, typer.Option(help="Processes for the RDKit work.")] = 2,
    vocabulary: VocabOption = None,
    data_root: DataRootOption = None,
) -> None:
    """Build (once; cached with its checksum) the mini SynSpace and print its cache folder and size as JSON."""
    config = _space_config(n_molecules, max_blocks, conformers, seed, workers)
    folder = _vocab_folder(vocabulary, data_root)
    from flowlab.core.artifacts import ensure
    from flowlab.molecular.syncogen.space import space_artifact

    entry = ensure(space_artifact(config, folder))
    count = len(json.loads((entry.path / "smiles.json").read_text()))
    typer.echo(json.dumps({"folder": str(entry.path), "molecules": count, "built": entry.built,
                           "build_seconds": entry.seconds}))  # fmt: skip


@app.command()
def train(
    out: Annotated[Path, typer.Option(help="Run folder (model.pt, config.json, ckpt/).")],
    variant: Annotated[str, typer.Option(help=f"One of {', '.join(VARIANTS)}.")] = "syncogen",
    steps: Annotated[int, typer.Option(help="AdamW steps.")] = 2000,
    batch_size: Annotated[int, typer.Option(help="Molecules per step.")] = 32,
    lr: Annotated[float, typer.Option(help="Peak learning rate.")] = 1e-3,
    dim: Annotated[int, typer.Option(help="Network width.")] = 64,
    layers: Annotated[int, typer.Option(help="EGNN layers.")] = 3,
    n_molecules: Annotated[int, typer.Option(help="Mini SynSpace size.")] = 2000,
    max_blocks: Annotated[int, typer.Option(help="Blocks per molecule at most.")] = 3,
    conformers: Annotated[int, typer.Option(help="Conformers per molecule.")] = 1,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the weights and batches.")] = 0,
    vocabulary: VocabOption = None,
    data_root: DataRootOption = None,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
    overwrite: Annotated[bool, typer.Option(help=OVERWRITE_HELP)] = False,
    resume: Annotated[bool, typer.Option(help=RESUME_HELP)] = False,
) -> None:
    """Train one variant on the training split of the mini SynSpace (built on first use)."""
    choice_option(variant, VARIANTS, "--variant")
    for value, option in ((steps, "--steps"), (batch_size, "--batch-size"), (dim, "--dim"), (layers, "--layers")):
        _positive(value, option)
    if not (lr > 0 and lr < 1):
        raise typer.BadParameter(f"expected 0 < lr < 1, got {lr}", param_hint="--lr")
    space_cfg = _space_config(n_molecules, max_blocks, conformers, 0, 2)
    dev = device_option(device)
    folder = _vocab_folder(vocabulary, data_root)
    from flowlab.molecular.syncogen.train import TrainConfig

    config = TrainConfig(steps=steps, batch_size=batch_size, lr=lr, dim=dim, layers=layers, seed=seed % 2**63,
                         warmup=min(100, steps // 10 + 1))  # fmt: skip
    spec = {"command": "molecular syncogen train", "variant": variant, "train": config.to_dict(),
            "space": space_cfg.to_dict(), "vocabulary": str(folder)}  # fmt: skip
    claim_run_option(out, spec, overwrite=overwrite, resume=resume)
    from flowlab.molecular.syncogen.space import load_space
    from flowlab.molecular.syncogen.train import save_run, train_variant
    from flowlab.molecular.syncogen.vocabulary import load_vocabulary

    vocab = load_vocabulary(folder)
    space = load_space(space_cfg, vocab_folder=folder)
    net = train_variant(variant, vocab, space, config, device=dev, ckpt_dir=out / "ckpt", resume=resume, progress=True)
    save_run(out, variant, net, config, {"space": space_cfg.to_dict(), "vocabulary": str(folder)})
    typer.echo(f"wrote the {variant} model to {out}")


def _load(run: Path, device: str):
    """(vocabulary, network, config.json) of a run folder; problems are reported against RUN."""
    dev = device_option(device)
    from flowlab.molecular.syncogen.train import load_run
    from flowlab.molecular.syncogen.vocabulary import load_vocabulary

    try:
        meta = json.loads((run / "config.json").read_text())
        vocab = load_vocabulary(meta["vocabulary"])
        net, meta = load_run(run, vocab, device=dev)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as err:
        raise typer.BadParameter(f"not a syncogen run folder ({err})", param_hint="RUN") from err
    return vocab, net, meta, dev


def _generate(vocab, net, meta, n: int, steps: int, seed: int, device, compat: bool):
    import torch

    from flowlab.molecular.syncogen.constraints import GraphConstraints
    from flowlab.molecular.syncogen.evaluate import decode_atoms, decode_blocks
    from flowlab.molecular.syncogen.sample import sample_joint
    from flowlab.molecular.syncogen.space import SpaceConfig, load_space
    from flowlab.molecular.syncogen.train import loss_config

    variant = meta["variant"]
    constraints = None if variant == "atoms" else GraphConstraints(vocab, net.config.n_nodes, compatibility=compat)
    g = torch.Generator(device=device).manual_seed(seed % 2**63)
    out = sample_joint(net, n, steps=steps, constraints=constraints, loss_config=loss_config(variant), generator=g,
                       device=device)  # fmt: skip
    space = load_space(SpaceConfig.from_mapping(meta["space"]), vocab_folder=meta["vocabulary"])
    generated = decode_atoms(out, set(space.smiles)) if variant == "atoms" else decode_blocks(vocab, out)
    return generated, space


RunArg = Annotated[Path, typer.Argument(help="A run folder written by `syncogen train`.")]


@app.command()
def generate(
    run: RunArg,
    out: Annotated[Path, typer.Option(help="SDF file for the valid molecules (route and blocks as properties).")],
    n: Annotated[int, typer.Option("-n", "--n", help="Molecules to sample.")] = 500,
    steps: Annotated[int, typer.Option(help="Sampling steps.")] = 100,
    compat: Annotated[bool, typer.Option(help="Apply the compatibility mask (--no-compat: the ablation).")] = True,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the sampler.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
) -> None:
    """Sample molecules with their conformers; write the valid ones to OUT (.sdf) and print the counts as JSON."""
    _positive(n, "--n", 1, 100_000)
    _positive(steps, "--steps", 1, 10_000)
    if out.suffix.lower() != ".sdf" or out.is_dir():
        raise typer.BadParameter(f"expected a .sdf file, got {out.name!r}", param_hint="--out")
    vocab, net, meta, dev = _load(run, device)
    from flowlab.molecular.syncogen.evaluate import write_sdf

    generated, _ = _generate(vocab, net, meta, n, steps, seed, dev, compat)
    out.parent.mkdir(parents=True, exist_ok=True)
    written = write_sdf(out, generated)
    typer.echo(json.dumps({"sampled": n, "valid": written, "synthesizable": sum(g.synthesizable for g in generated),
                           "sdf": str(out)}))  # fmt: skip


@app.command()
def evaluate(
    run: RunArg,
    n: Annotated[int, typer.Option("-n", "--n", help="Molecules to sample and score.")] = 200,
    steps: Annotated[int, typer.Option(help="Sampling steps.")] = 100,
    etkdg: Annotated[bool, typer.Option(help="Also score the same graphs with RDKit ETKDG conformers.")] = False,
    xtb: Annotated[int, typer.Option(help="Mean GFN2-xTB energy of this many valid molecules (0: off).")] = 0,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the sampler.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda, cuda:N or mps.")] = "cpu",
) -> None:
    """Validity, synthesizability, uniqueness, novelty, median MMFF strain and PoseBusters-style checks of N
    samples, as one JSON line per row."""
    _positive(n, "--n", 1, 100_000)
    _positive(steps, "--steps", 1, 10_000)
    _positive(xtb, "--xtb", 0, 1000)
    vocab, net, meta, dev = _load(run, device)
    from flowlab.core.cli import json_text
    from flowlab.molecular.syncogen.evaluate import score, with_etkdg

    generated, space = _generate(vocab, net, meta, n, steps, seed, dev, True)
    train_smiles = set(space.subset(0).smiles)
    typer.echo(json_text({"row": meta["variant"], **score(generated, train_smiles, xtb=xtb)}))
    if etkdg and meta["variant"] != "atoms":
        typer.echo(json_text({"row": "graph_etkdg", **score(with_etkdg(generated, seed % 2**31), train_smiles)}))
