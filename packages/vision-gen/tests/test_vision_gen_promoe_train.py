"""Training, sampling and storing a ProMoE variant: the loss falls when overfitting a few digits, guidance 1 is the
conditional model, a saved model loads back equal, and the Python entry points reject bad input."""

from __future__ import annotations

import pytest
import torch

from flowlab.core.grids import uniform
from flowlab.core.solvers import solve_ode
from flowlab.vision_gen.kit.data import load_digits_images
from flowlab.vision_gen.promoe.model import ModelConfig, promoe_dit
from flowlab.vision_gen.promoe.sample import sample_digits
from flowlab.vision_gen.promoe.store import load_model, save_model
from flowlab.vision_gen.promoe.train import TrainConfig, promoe_loss, train_promoe

pytestmark = pytest.mark.usefixtures("one_thread")

SMALL = ModelConfig(dim=16, depth=2, heads=2, num_routed=3)


@pytest.mark.parametrize("objective", ["rf", "ddpm"])
def test_overfitting_a_few_digits_lowers_the_loss(objective):
    data = load_digits_images(8)
    x, y = data.x[:8], data.y[:8]

    def loss_at(model, seed=0):
        with torch.no_grad():
            return float(promoe_loss(model.eval(), x, y, objective=objective,
                                     generator=torch.Generator().manual_seed(seed))[0])  # fmt: skip

    before = promoe_dit(SMALL, seed=0)
    after = train_promoe(SMALL, TrainConfig(objective=objective, steps=60, batch_size=8, lr=3e-3), x, y, device="cpu")
    assert sum(map(loss_at, [after] * 4, range(4))) < 0.8 * sum(map(loss_at, [before] * 4, range(4)))
    assert not after.training


def test_loss_carries_the_aux_losses():
    data = load_digits_images(8)
    model = promoe_dit(SMALL).train()
    loss, logs = promoe_loss(
        model, data.x[:16], data.y[:16], objective="rf", generator=torch.Generator().manual_seed(0)
    )
    assert float(logs["aux"]) > 0 and float(loss.detach()) == pytest.approx(float(logs["regression"] + logs["aux"]))


def test_guidance_one_is_the_conditional_model_and_samples_are_clamped():
    torch.manual_seed(0)
    model = promoe_dit(SMALL).eval()
    for p in model.parameters():
        p.data += 0.05 * torch.randn_like(p)
    noise, labels = torch.randn(6, 1, 8, 8), torch.arange(6)
    ours = sample_digits(model, labels, noise, steps=3, cfg_scale=1.0)
    with torch.inference_mode():
        plain = solve_ode(model, noise, uniform(3), method="euler", y=labels).clamp(-1, 1)
    assert torch.equal(ours, plain)
    guided = sample_digits(model, labels, noise, steps=3, cfg_scale=2.0)
    assert guided.shape == (6, 1, 8, 8) and float(guided.abs().max()) <= 1 and not torch.equal(guided, ours)
    assert sample_digits(model, labels, noise, objective="ddpm", steps=3).shape == (6, 1, 8, 8)


def test_store_round_trip(tmp_path):
    config = ModelConfig(variant="tc", dim=16, depth=2, heads=2, num_routed=3)
    model = promoe_dit(config, seed=4)
    save_model(tmp_path / "m", model, config, TrainConfig(steps=5))
    loaded, model_config, config = load_model(tmp_path / "m")
    assert model_config.variant == "tc" and config.steps == 5 and not loaded.training
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value)
    with pytest.raises(ValueError, match=r"checkpoint: .* \(no config.json\)"):
        load_model(tmp_path)


@pytest.mark.parametrize(
    ("images", "labels", "match"),
    [
        (torch.zeros(4, 1, 16, 16), torch.zeros(4, dtype=torch.long), "images"),
        (torch.zeros(4, 8, 8), torch.zeros(4, dtype=torch.long), "images"),
        (torch.full((4, 1, 8, 8), float("nan")), torch.zeros(4, dtype=torch.long), "images"),
        (torch.zeros(4, 1, 8, 8), torch.zeros(4), "labels"),
        (torch.zeros(4, 1, 8, 8), torch.zeros(3, dtype=torch.long), "labels"),
        (torch.zeros(4, 1, 8, 8), torch.full((4,), 10), "labels"),
    ],
)
def test_train_rejects_bad_input(images, labels, match):
    with pytest.raises(ValueError, match=match):
        train_promoe(SMALL, TrainConfig(steps=1), images, labels, device="cpu")


BAD_TRAIN = [({"objective": "edm"}, "objective"), ({"steps": 0}, "steps"), ({"lr": float("nan")}, "lr"),
             ({"ema_decay": 1.0}, "ema_decay"), ({"seed": -1}, "seed"), ({"batch_size": 0}, "batch_size")]  # fmt: skip
BAD_SAMPLE = [({"objective": "edm"}, "objective"), ({"steps": 0}, "steps"), ({"cfg_scale": -1.0}, "cfg_scale"),
              ({"noise": torch.full((2, 1, 8, 8), float("nan"))}, "noise")]  # fmt: skip


@pytest.mark.parametrize(("kwargs", "match"), BAD_TRAIN)
def test_train_config_rejects_bad_values(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TrainConfig(**kwargs)


@pytest.mark.parametrize(("kwargs", "match"), BAD_SAMPLE)
def test_sample_rejects_bad_input(kwargs, match):
    args = {"noise": torch.randn(2, 1, 8, 8), **kwargs}
    with pytest.raises(ValueError, match=match):
        sample_digits(promoe_dit(SMALL).eval(), torch.arange(2), **args)
