"""EnvSocial-Diff on CUDA (skipped without a CUDA device): the denoiser's inputs, condition and DDIM sampler against
the CPU on the same noise, and a reproducible multi-replica rollout on the GPU."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlab.core.solvers import sample_diffusion
from flowlab.crowd_sim.envsocial_diff.features import FeatureConfig
from flowlab.crowd_sim.envsocial_diff.model import SIZES
from flowlab.crowd_sim.envsocial_diff.simulator import EnvSocialDiff, scene_categories
from flowlab.crowd_sim.simulate import InitialStates, StepState, simulate_window


def _models(scene) -> tuple[EnvSocialDiff, EnvSocialDiff]:
    """One random, non-trivial full model (every branch on; the head starts at zero) on the CPU and on CUDA."""
    config = SIZES["quick"].with_ablation(
        "full", categories=scene_categories(scene), features=FeatureConfig(env_radius=20.0)
    )
    torch.manual_seed(0)
    cpu = EnvSocialDiff(config, scale=0.5)
    for p in cpu.denoiser.parameters():
        torch.nn.init.normal_(p, std=0.3)
    gpu = EnvSocialDiff(config, scale=0.5, device="cuda")
    gpu.denoiser.load_state_dict(cpu.denoiser.state_dict())
    return cpu, gpu


def _state(window, frame: int, device: str) -> StepState:
    init = InitialStates.from_window(window, start=frame)
    alive = (window.first_frame <= frame) & (window.last_frame >= frame)
    parts = (init.positions[None], init.velocities[None], init.history[None, :, -1, 4:6], init.history[None])
    return StepState(*(x.to(device) for x in parts), alive.to(device), window.destinations.to(device), frame, None)


@pytest.mark.gpu
def test_envsocial_diff_samples_on_cuda_as_on_the_cpu(scene_factory, crossing):
    image = np.full((200, 200, 3), 40, dtype=np.uint8)
    image[:, 80:120] = 230  # a bright band: the lighting branch sees cells
    scene = scene_factory(image=image)
    cpu, gpu = _models(scene)
    out = {}
    noise = torch.randn(crossing.num_pedestrians, 2, generator=torch.Generator().manual_seed(1))
    for model, device in ((cpu, "cpu"), (gpu, "cuda")):
        inputs, _ = model.inputs(_state(crossing, 20, device), model.environment(scene))
        with torch.no_grad():
            cond = model.denoiser.encode(inputs)
            x = noise[: inputs.num_nodes].to(device)
            grid = model.grid("ddim", 4).to(device)
            eps = sample_diffusion(model.denoiser, x, grid, schedule=model.schedule, prediction="epsilon", cond=cond)
        out[device] = (cond.cpu(), eps.cpu())
    assert out["cpu"][0].shape[0] > 1 and float(out["cpu"][1].abs().max()) > 1e-2  # a non-trivial sample
    # float32 on both devices: the same network, inputs and DDIM steps agree to round-off
    torch.testing.assert_close(out["cuda"][0], out["cpu"][0], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(out["cuda"][1], out["cpu"][1], atol=1e-4, rtol=1e-4)

    runs = []
    for _ in range(2):
        gen = torch.Generator("cuda").manual_seed(7)
        policy = gpu.policy(scene, sampler="ddim", sample_steps=4)
        runs.append(simulate_window(scene, crossing, policy, steps=15, replicas=3, generator=gen, device="cuda"))
    positions = runs[0].positions
    assert positions.device.type == "cuda" and positions.shape == (3, 16, crossing.num_pedestrians, 2)
    assert bool(torch.isfinite(positions).all()) and runs[0].nfe_per_step == 4
    assert not torch.equal(positions[0], positions[1])  # the replicas draw their own noise
    # seeded: the same rollout again, up to the GPU's order of floating-point sums in the graph aggregation
    torch.testing.assert_close(runs[1].positions, positions, atol=1e-3, rtol=0)
