"""The EnvSocial-Diff simulator: the denoiser, its DDPM schedule, the destination force outside the diffusion, the
residual scale, and the scene environment as this model sees it.

At each frame, for every alive pedestrian: a = F_dest(p, v, g) + scale * R^T x, with x ~ p_theta(x | c) sampled by the
core's diffusion sampler (ancestral DDPM over the K training steps, or DDIM on a shorter grid) and R the ego frame.
The diffusion runs on the residual acceleration a_rec - F_dest in ego coordinates, divided by `scale` (its standard
deviation on the training data), so the model's target has unit variance.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch

from flowlab.core.schedules import DiscreteVP
from flowlab.core.solvers import sample_diffusion
from flowlab.core.train import load_weights
from flowlab.crowd_sim.envsocial_diff.features import (
    FeatureConfig,
    SceneEnvironment,
    StepInputs,
    brightness_cells,
    step_inputs,
)
from flowlab.crowd_sim.envsocial_diff.model import EnvSocialConfig, EnvSocialDenoiser
from flowlab.crowd_sim.envsocial_diff.names import SAMPLERS
from flowlab.crowd_sim.physics import DestinationForce
from flowlab.crowd_sim.simulate import StepState

__all__ = ["EnvSocialDiff", "scene_categories", "scene_config"]

FORMAT = "flowlab.crowd_sim.EnvSocialDiff/1"


def scene_categories(*scenes) -> tuple[str, ...]:
    """The annotation vocabulary of the scenes (index 0 reserved for unknown categories)."""
    names = sorted({c for s in scenes for boxes in (s.obstacles, s.interests) for c in boxes.categories})
    return ("<unknown>", *names)


def scene_config(base: EnvSocialConfig, ablation: str, scene) -> EnvSocialConfig:
    """`base` (e.g. a `SIZES` entry) with the branches of `ablation`, the scene's annotation vocabulary and the
    official neighbourhoods of its `constants`: the model configuration the CLI and the benchmarks train."""
    return base.with_ablation(
        ablation, categories=scene_categories(scene), features=FeatureConfig.from_constants(scene.constants)
    )


class EnvSocialDiff:
    """A trained (or untrained) EnvSocial-Diff model; `policy(scene)` plugs it into `simulate`."""

    def __init__(
        self,
        config: EnvSocialConfig,
        *,
        destination_force: DestinationForce | None = None,
        scale: float = 1.0,
        device: torch.device | str = "cpu",
    ) -> None:
        self.config = config
        self.device = torch.device(device)
        self.denoiser = EnvSocialDenoiser(config).to(self.device)
        self.destination_force = destination_force or DestinationForce()
        self.scale = float(scale)
        self.schedule = DiscreteVP.linear(config.steps, config.beta_start, config.beta_end)

    # ------------------------------------------------------------------------------------------- scene and inputs
    def environment(self, scene, *, all_branches: bool = False) -> SceneEnvironment:
        """The scene's boxes (when the environment branch is on) and brightness cells (when the lighting branch is
        on): features a branch that is off would ignore are not computed at every step. The denoiser masks the box
        kinds its configuration turns off. all_branches: keep every box and cell, for inputs that other
        configurations share (`objective.training_frames`)."""
        index = {c: i for i, c in enumerate(self.config.categories)}
        boxes = [(scene.obstacles, 0), (scene.interests, 1)] if all_branches or self.config.environment else []
        corners = torch.cat([torch.zeros(0, 4, 2), *(b.corners.float() for b, _ in boxes)])
        centres = torch.cat([torch.zeros(0, 2), *(b.centres.float() for b, _ in boxes)])
        kind = torch.cat([torch.zeros(0, dtype=torch.long), *(torch.full((len(b.categories),), k) for b, k in boxes)])
        category = torch.tensor([index.get(c, 0) for b, _ in boxes for c in b.categories], dtype=torch.long)
        cells, bright = torch.zeros(0, 2), torch.zeros(0)
        if scene.image is not None and (all_branches or self.config.lighting):
            cell_px = max(1, int(scene.constants.get("bright_grid", 220)) // int(scene.constants.get("bin", 10)))
            cells, bright = brightness_cells(scene, cell_px)
        return SceneEnvironment(corners, centres, kind, category, cells, bright).to(self.device)

    def inputs(self, state: StepState, env: SceneEnvironment) -> tuple[StepInputs, torch.Tensor]:
        """Inputs of the alive pedestrians of every replica (one graph per replica and group of `state.groups`), and
        their (replica, pedestrian) flat indices."""
        R, P = state.positions.shape[:2]
        alive = state.alive.expand(R, P)
        rep, ped = alive.nonzero(as_tuple=True)
        graph = rep
        if state.groups is not None:  # one graph per (replica, group)
            graph = rep * (int(state.groups.max()) + 1) + state.groups[ped]
        inputs = step_inputs(
            state.positions[rep, ped],
            state.velocities[rep, ped],
            state.accelerations[rep, ped],
            state.history[rep, ped],
            state.destinations[ped],
            graph,
            env,
            self.config.features,
            self.destination_force,
        )
        return inputs, rep * P + ped

    # ------------------------------------------------------------------------------------------------- sampling
    def grid(self, sampler: str, sample_steps: int | None) -> torch.Tensor:
        """Core-time grid: all K steps for "ddpm"; `sample_steps` (default K) evenly spaced steps for "ddim"."""
        K = self.config.steps
        n = K if sampler == "ddpm" or sample_steps is None else int(sample_steps)
        if not 1 <= n <= K:
            raise ValueError(f"sample_steps: expected 1..{K} (the training steps), got {sample_steps!r}")
        return torch.linspace(0.0, 1.0, n + 1, dtype=torch.float64)

    @torch.no_grad()
    def sample_residual(
        self, inputs: StepInputs, *, generator, sampler: str = "ddpm", sample_steps: int | None = None
    ) -> torch.Tensor:
        """Sampled residual accelerations in world coordinates: (N, 2)."""
        if sampler not in SAMPLERS:
            raise ValueError(f"sampler: expected one of {SAMPLERS}, got {sampler!r}")
        if self.denoiser.training:
            self.denoiser.eval()
        cond = self.denoiser.encode(inputs)
        n = inputs.num_nodes
        x = torch.randn(n, 2, generator=generator, device=self.device)
        x = sample_diffusion(
            self.denoiser,
            x,
            self.grid(sampler, sample_steps).to(self.device),
            schedule=self.schedule,
            prediction="epsilon",
            method=sampler,
            generator=generator,
            cond=cond,
        )
        return self.scale * torch.einsum("nji,nj->ni", inputs.rotations, x)

    def policy(
        self,
        scene,
        *,
        sampler: str = "ddpm",
        sample_steps: int | None = None,
        env: SceneEnvironment | None = None,
        on_inputs: Callable[[StepState, StepInputs, torch.Tensor], None] | None = None,
    ):
        """A `simulate` policy: accelerations F_dest + sampled residual for the alive pedestrians. env: the scene's
        `environment` when already computed (it is static); on_inputs: called at every step as
        on_inputs(state, inputs, flat) (`inputs` returns both; no pedestrian when none is alive), before sampling,
        e.g. to record training inputs without computing them twice. The policy carries the model's goal model
        (`goal`, `goal_lookahead`) for forecasting."""
        env = self.environment(scene) if env is None else env
        model = self

        class _Policy:
            nfe_per_step = len(model.grid(sampler, sample_steps)) - 1
            goal, goal_lookahead = model.config.goal, model.config.goal_lookahead

            def __call__(self, state: StepState) -> torch.Tensor:
                out = model.destination_force(state.positions, state.velocities, state.destinations)
                alive = bool(state.alive.any())
                if not (alive or on_inputs):
                    return out
                inputs, flat = model.inputs(state, env)
                if on_inputs is not None:
                    on_inputs(state, inputs, flat)
                if not alive:
                    return out
                residual = model.sample_residual(
                    inputs, generator=state.generator, sampler=sampler, sample_steps=sample_steps
                )
                out = out.reshape(-1, 2).clone()
                out[flat] = out[flat] + residual
                return out.reshape(state.positions.shape)

        return _Policy()

    # ----------------------------------------------------------------------------------------------- persistence
    def save(self, path: str | Path) -> Path:
        """Writes the config, destination force, scale and denoiser weights to `path` (parents created), for `load`;
        returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(
            {
                "format": FORMAT,
                "config": self.config.to_dict(),
                "destination_force": asdict(self.destination_force),
                "scale": self.scale,
                "state_dict": self.denoiser.state_dict(),
            },
            path,
        )
        return path

    @classmethod
    def load(cls, path: str | Path, *, device: torch.device | str = "cpu") -> EnvSocialDiff:
        """The model `save` wrote to `path`; FileNotFoundError, or ValueError naming the file when it is corrupt or
        unsafe, of another kind, or holds settings or weights that do not make this model (or non-finite ones)."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint not found: {path}")
        blob = load_weights(path, map_location="cpu", name="checkpoint")
        if not isinstance(blob, dict) or blob.get("format") != FORMAT:
            raise ValueError(f"{path}: not an EnvSocial-Diff checkpoint (expected format {FORMAT!r})")
        try:
            config = EnvSocialConfig.from_mapping(blob["config"])
            force = DestinationForce(**blob["destination_force"])
            scale = float(blob["scale"])
            state = dict(blob["state_dict"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{path}: not a loadable EnvSocial-Diff checkpoint ({type(err).__name__}: {err})") from err
        finite = [isinstance(t, torch.Tensor) and bool(torch.isfinite(t).all()) for t in state.values()]
        if not (math.isfinite(scale) and all(finite)):
            raise ValueError(f"{path}: holds a non-finite residual scale, or weights that are not finite tensors")
        model = cls(config, destination_force=force, scale=scale, device=device)
        try:
            model.denoiser.load_state_dict(state)
        except RuntimeError as err:  # weights of another network
            detail = " ".join(str(err).split())[:300]
            raise ValueError(f"{path}: its weights do not fit its config ({detail})") from err
        return model
