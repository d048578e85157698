"""`flowlab vision sfbd run|restore`: learn the digits distribution from corrupted observations plus a few clean
images with SFBD-OMNI, and restore new observations with a saved posterior."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flowlab.core.cli import (
    OVERWRITE_HELP,
    RESUME_HELP,
    SEEDS,
    claim_run_option,
    device_option,
    json_text,
    option_error,
)

app = typer.Typer(help="SFBD-OMNI: a clean distribution from corrupted samples.", no_args_is_help=True)

_OBSERVATIONS = (".pt", ".npy", ".safetensors")
_SIZE = 8  # the digits' side


def _corruption_spec(corruption: str, p: float, sigma: float, k: int, keep: int, noise_std: float):
    import torch

    from flowlab.vision_gen.kit.corruptions import make_corruption

    params = {"noise": {"sigma": sigma}, "mask": {"p": p}, "pool": {"k": k, "noise_std": noise_std},
              "dct": {"keep": keep, "noise_std": noise_std}}  # fmt: skip
    if corruption not in params:
        raise typer.BadParameter(f"expected one of {', '.join(params)}, got {corruption!r}", param_hint="--corruption")
    try:
        corr = make_corruption(corruption, **params[corruption])
        corr.sample(torch.zeros(1, 1, _SIZE, _SIZE), generator=torch.Generator())  # its sizes fit the digits
    except ValueError as err:
        raise option_error(err, {"x": "--k"}) from err  # x: the image side is no multiple of the pooling size
    return (corruption, params[corruption]), corr


@app.command()
def run(
    out: Annotated[Path, typer.Option(help="Folder for the posterior, per-round measures, images and checkpoints.")],
    corruption: Annotated[str, typer.Option(help="noise, mask, pool or dct.")] = "mask",
    p: Annotated[float, typer.Option(help="mask: the probability a pixel is hidden.")] = 0.5,
    sigma: Annotated[float, typer.Option(help="noise: the Gaussian noise std (images in [-1, 1]).")] = 0.3,
    k: Annotated[int, typer.Option(help="pool: the average-pooling size.")] = 2,
    keep: Annotated[int, typer.Option(help="dct: DCT coefficients kept per axis.")] = 4,
    noise_std: Annotated[float, typer.Option(help="pool, dct: noise on the measurement.")] = 0.0,
    clean: Annotated[int, typer.Option(help="Clean train images given (as even over classes as possible).")] = 50,
    rounds: Annotated[int, typer.Option(help="Reconstruct/retrain rounds.")] = 4,
    pretrain_steps: Annotated[int, typer.Option(help="Steps on the clean set before the first round.")] = 100,
    steps: Annotated[int, typer.Option(help="Training steps per round.")] = 500,
    clean_weight: Annotated[
        float | None, typer.Option(help="lambda / (1 + lambda); default 0 if identifiable, else 0.2.")
    ] = None,
    online_gamma: Annotated[float | None, typer.Option(help="The online variant's refresh share.")] = None,
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the clean choice, the corruption and the training.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
    overwrite: Annotated[bool, typer.Option(help=OVERWRITE_HELP)] = False,
    resume: Annotated[bool, typer.Option(help=RESUME_HELP)] = False,
) -> None:
    """Corrupt the digits train split (but `clean` images), run SFBD-OMNI, measure each round's reconstructions
    against the test split (OUT/rounds.jsonl), save the posterior (OUT/posterior.safetensors, OUT/config.json),
    the final reconstructions (OUT/reconstructions.pt) and a grid of observations over reconstructions over the
    truth (OUT/reconstructions.png). --resume continues the same options' run from OUT/ckpt after the last
    finished round; a different run in OUT is refused unless --overwrite."""
    import torch

    from flowlab.core.train import data_fingerprint
    from flowlab.vision_gen.kit.quality import save_image_grid
    from flowlab.vision_gen.sfbd_omni.data import corrupted_digits
    from flowlab.vision_gen.sfbd_omni.evaluate import distribution_measures
    from flowlab.vision_gen.sfbd_omni.model import SFBDConfig
    from flowlab.vision_gen.sfbd_omni.store import save_posterior
    from flowlab.vision_gen.sfbd_omni.train import sfbd_omni

    dev = device_option(device)
    spec, corr = _corruption_spec(corruption, p, sigma, k, keep, noise_std)
    try:
        config = SFBDConfig(rounds=rounds, pretrain_steps=pretrain_steps, steps_per_round=steps,
                            clean_weight=clean_weight, online_gamma=online_gamma, seed=seed)  # fmt: skip
        data = corrupted_digits(corr, clean_count=clean, size=_SIZE, seed=seed)
    except ValueError as err:
        raise option_error(err, {"steps_per_round": "--steps", "clean_count": "--clean"}) from err
    if data.clean.shape[0] == 0 and config.weight_for(corr.identifiable) > 0:
        raise typer.BadParameter("a clean weight above 0 needs clean images; give --clean > 0", param_hint="--clean")
    spec_run = {"command": "vision sfbd run", "corruption": list(spec), "clean": clean, "seed": seed,
                "config": config.to_dict(), "data_fingerprint": data_fingerprint(data.clean, data.y)}  # fmt: skip
    claim_run_option(out, spec_run, overwrite=overwrite, resume=resume)
    log = (out / "rounds.jsonl").open("a")

    def record(k: int, pool: torch.Tensor) -> None:
        row = {"round": k, **distribution_measures(pool, data.reference, corruption=corr)}
        log.write(json_text(row) + "\n")
        log.flush()
        typer.echo(json_text(row))

    with log:
        result = sfbd_omni(data.y, data.clean, corr, config, device=dev, progress=True, ckpt_dir=out / "ckpt",
                           callback=record)  # fmt: skip
    save_posterior(out, result.model, config, spec)
    final = result.pools[-1]
    torch.save(final, out / "reconstructions.pt")
    save_image_grid(out / "reconstructions.png", torch.cat([corr.start(data.y[:10]), final[:10], data.truth[:10]]))
    typer.echo(f"wrote the posterior and {final.shape[0]} reconstructions to {out}")


def _npy(path: Path):
    """The array of a plain .npy file (numpy's own errors would advise loading pickles)."""
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError):
        raise ValueError("not a plain .npy array (empty, corrupt or pickled)") from None


def _read_observations(path: Path):
    import torch
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    from flowlab.core.train import load_weights

    if path.suffix not in _OBSERVATIONS:
        raise typer.BadParameter(f"expected one of {', '.join(_OBSERVATIONS)}, got {path}", param_hint="--observations")
    if not path.is_file():
        raise typer.BadParameter(f"{path} not found", param_hint="--observations")
    try:
        if path.suffix == ".npy":
            y = torch.from_numpy(_npy(path))
        elif path.suffix == ".safetensors":
            tensors = load_file(path)
            if len(tensors) != 1:
                raise ValueError(f"{path} holds {len(tensors)} tensors; expected one")
            y = next(iter(tensors.values()))
        else:
            y = load_weights(path, name="--observations")
    except (ValueError, OSError, SafetensorError) as err:
        raise typer.BadParameter(f"cannot read {path}: {err}", param_hint="--observations") from err
    if not isinstance(y, torch.Tensor) or not y.is_floating_point():
        raise typer.BadParameter(f"{path} does not hold one float tensor", param_hint="--observations")
    return y.float()


@app.command()
def restore(
    model: Annotated[Path, typer.Option(help="A folder written by `run`.")],
    observations: Annotated[Path, typer.Option(help="Observations (N, C_y, H, W) as .pt, .npy or .safetensors.")],
    out: Annotated[Path, typer.Option(help="Output .pt of posterior samples (a .png grid beside it).")],
    seed: Annotated[int, typer.Option(**SEEDS, help="Seed of the posterior sampling.")] = 0,
    device: Annotated[str, typer.Option(help="cpu, cuda or cuda:N.")] = "cpu",
) -> None:
    """Posterior samples x ~ u(. | y) of the posterior in MODEL for each observation, observations in the shape its
    corruption produces (masked images carry the mask as a last channel)."""
    import torch

    from flowlab.vision_gen.kit.quality import save_image_grid
    from flowlab.vision_gen.sfbd_omni.store import load_posterior
    from flowlab.vision_gen.sfbd_omni.train import reconstruct

    dev = device_option(device)
    if out.suffix != ".pt":
        raise typer.BadParameter(f"expected a .pt path, got {out}", param_hint="--out")
    try:
        posterior, config, corruption = load_posterior(model, device=dev)
    except ValueError as err:
        raise typer.BadParameter(str(err), param_hint="--model") from err
    y = _read_observations(observations)
    want = (corruption.observation_channels(posterior.image_shape[0]), *posterior.image_shape[1:])
    if y.dim() != 4 or tuple(y.shape[1:]) != want:
        raise typer.BadParameter(f"{observations}: expected (N, {', '.join(map(str, want))}) for {corruption!r}, "
                                 f"got {tuple(y.shape)}", param_hint="--observations")  # fmt: skip
    if not bool(torch.isfinite(y).all()):
        raise typer.BadParameter(f"{observations} contains NaN or inf values", param_hint="--observations")
    x = reconstruct(posterior, y.to(dev), corruption, config, generator=torch.Generator().manual_seed(seed)).cpu()
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(x, out)
    save_image_grid(out.with_suffix(".png"), x[:100].clamp(-1, 1))
    typer.echo(f"wrote {x.shape[0]} restored images to {out}")
