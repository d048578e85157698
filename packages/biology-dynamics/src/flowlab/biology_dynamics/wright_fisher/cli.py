"""`flowlab dna train|sample|evaluate`: Wright-Fisher simplicial diffusion and its discrete, Gaussian, masked and
unified siblings on the toy categoricals, a Markov chain or class- or profile-conditional DNA with JASPAR motifs."""

from __future__ import annotations

from pathlib import Path

import typer

from flowlab.core.cli import OVERWRITE_HELP, RESUME_HELP, SEEDS, option_error

app = typer.Typer(help="Wright-Fisher simplicial diffusion (and discrete, Gaussian, masked, unified) on sequences.")


@app.command("train")
def train_cmd(
    ctx: typer.Context,
    out: Path = typer.Option(Path("runs/dna"), "--out", help="run folder (checkpoints)"),
    task: str = typer.Option("motifs", "--task", help="toy-simplex | markov | motifs"),
    domain: str = typer.Option(
        "simplicial",
        "--domain",
        help="simplicial | discrete | gaussian | masked | unified | dirichlet-fm | linear-fm | ddsm-lite",
    ),
    letters: int = typer.Option(4, "--letters", help="alphabet size (toy-simplex, markov)"),
    length: int = typer.Option(100, "--length"),
    classes: int = typer.Option(2, "--classes", help="motif classes (motifs task, up to 8)"),
    steps: int = typer.Option(2000, "--steps"),
    batch: int = typer.Option(64, "--batch"),
    lr: float = typer.Option(2e-3, "--lr"),
    width: int = typer.Option(64, "--width", help="MLP hidden size (toy tasks) or CNN channels (motifs)"),
    stacks: int = typer.Option(1, "--stacks", help="CNN dilation stacks (motifs)"),
    condition: str = typer.Option(
        "class", "--condition", help="class | profile: condition on the motif class or the oracle profile (motifs)"
    ),
    window: int = typer.Option(
        20,
        "--window",
        help="letters per profile window (motifs): the condition of --condition profile runs and the profile MSE "
        "of every motif run; at least the widest class motif",
    ),
    seed: int = typer.Option(0, "--seed", **SEEDS),
    device: str = typer.Option("cpu", "--device"),
    overwrite: bool = typer.Option(False, "--overwrite", help=OVERWRITE_HELP),
    resume: bool = typer.Option(False, "--resume", help=RESUME_HELP),
) -> None:
    """Train a model into --out; --resume continues this run there (--steps may grow)."""
    from flowlab.biology_dynamics.wright_fisher.run import DNARun, train_run

    try:
        run = DNARun(task=task, domain=domain, letters=letters, length=length, classes=classes, steps=steps,
                     batch=batch, lr=lr, width=width, stacks=stacks, seed=seed, condition=condition,
                     window=window)  # fmt: skip
        folder = train_run(run, out, device=device, resume=resume, overwrite=overwrite)
    except ValueError as err:
        raise option_error(err, ctx=ctx) from err
    typer.echo(f"trained {run.domain} on {run.task} into {folder}")


@app.command("sample")
def sample_cmd(
    ctx: typer.Context,
    folder: Path = typer.Argument(..., help="a folder written by `flowlab dna train`"),
    out: Path = typer.Option(Path("samples.fasta"), "--out", help="FASTA (4 letters) or one line of letters each"),
    n: int | None = typer.Option(None, "--n", help="sequences (default: one per --profile row, else 100)"),
    steps: int = typer.Option(100, "--steps"),
    label: int | None = typer.Option(None, "--class", help="motif class to generate (default: balanced)"),
    profile: Path | None = typer.Option(
        None,
        "--profile",
        help="target profiles of a --condition profile run: .npy or .pt of shape (n, classes, length // window)",
    ),
    domain: str | None = typer.Option(None, "--domain", help="the domain a unified run samples in"),
    seed: int = typer.Option(0, "--seed", **SEEDS),
    device: str = typer.Option("cpu", "--device"),
) -> None:
    """Sample sequences from a trained run."""
    from flowlab.biology_dynamics.wright_fisher.dna import ALPHABET, decode, write_fasta
    from flowlab.biology_dynamics.wright_fisher.motifs import read_profile
    from flowlab.biology_dynamics.wright_fisher.run import load_run, sample_run

    try:
        targets = None if profile is None else read_profile(profile)
        run, net = load_run(folder, device=device)
        x = sample_run(run, net, n, steps=steps, label=label, profile=targets, sample_domain=domain, device=device,
                       seed=seed)  # fmt: skip
    except ValueError as err:
        raise option_error(err, ctx=ctx, default="FOLDER") from err
    if run.letters == len(ALPHABET):
        write_fasta(out, decode(x), names=[f"sample_{i}" for i in range(len(x))])
    else:
        out.write_text("".join(" ".join(map(str, row)) + "\n" for row in x.tolist()))
    typer.echo(f"wrote {len(x)} sequences to {out}")


@app.command("evaluate")
def evaluate_cmd(
    ctx: typer.Context,
    folder: Path = typer.Argument(..., help="a folder written by `flowlab dna train`"),
    n: int = typer.Option(1000, "--n"),
    steps: int = typer.Option(100, "--steps"),
    domain: str | None = typer.Option(None, "--domain", help="the domain a unified run is scored in"),
    seed: int = typer.Option(1, "--seed", **SEEDS),
    device: str = typer.Option("cpu", "--device"),
) -> None:
    """ELBO (nats per position) on fresh data, and sample KL (toy tasks) or motif hit rate and per-sequence
    profile error against the data's profiles, beside the data's own (motifs)."""
    from flowlab.biology_dynamics.wright_fisher.run import evaluate_run, load_run

    try:
        run, net = load_run(folder, device=device)
        scores = evaluate_run(run, net, n=n, steps=steps, sample_domain=domain, device=device, seed=seed)
    except ValueError as err:
        raise option_error(err, ctx=ctx, default="FOLDER") from err
    typer.echo("  ".join(f"{k} {v:.4g}" for k, v in scores.items()))
