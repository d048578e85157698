"""Clipped Euler steppers: exact tangents of the clipped map, states inside their bounds, and the path envelope
that keeps the law a range clip distorts."""

from __future__ import annotations

import pytest
import torch

from flowlab.core import grids
from flowlab.core.solvers import JVPState, clipped_euler, clipped_jvp_euler, scalar_vjp_euler, solve_ode


@pytest.mark.parametrize("mode", ["jvp", "vjp"])
def test_jacobian_of_affine_field_is_exact(mode):
    a = 0.7

    def field(*, x, t):
        return a * x + torch.sin(3 * t)[:, None]

    x0 = torch.randn(4, 1, dtype=torch.float64)
    out = solve_ode(
        field,
        JVPState(x0, torch.ones_like(x0)),
        grids.uniform(10, dtype=torch.float64),
        method=clipped_jvp_euler(-1e9, 1e9, mode=mode),
    )
    torch.testing.assert_close(out.tangent, torch.full_like(x0, (1 + a / 10) ** 10))


@pytest.mark.parametrize("noise_bound", [None, 0.0, 2.5])
def test_clipping_keeps_every_intermediate_state_in_its_bounds(noise_bound):
    """Literal clipping (None) keeps every state in [low, high]; the path envelope keeps the state at time t in
    [t low - (1 - t) c, t high + (1 - t) c], which is [low, high] at t = 1."""

    def field(*, x, t):
        return 40 * torch.sign(x) + 5

    x0 = torch.linspace(-2, 2, 9)[:, None]
    grid = grids.uniform(10)
    method = clipped_euler(-1.0, 3.0, noise_bound=noise_bound)
    traj = solve_ode(field, x0, grid, method=method, return_trajectory=True).states[1:, :, 0]  # (10, 9)
    t = grid[1:, None]
    lo, hi = (-1.0, 3.0) if noise_bound is None else (t * -1.0 - (1 - t) * noise_bound, t * 3.0 + (1 - t) * noise_bound)
    assert (traj >= lo - 1e-6).all() and (traj <= hi + 1e-6).all()
    assert traj[-1].min() >= -1.0 and traj[-1].max() <= 3.0
    assert traj.min() < -0.5 and traj.max() > 2.5  # the field pushes against both bounds: the clip was active


def test_path_envelope_keeps_the_law_that_a_range_clip_distorts():
    """The exact linear-path field from N(0, 1) to N(m, s^2) inside a narrow return range [m - 5s, m + 5s]. Under the
    path envelope the clipped Euler flow equals the unclipped one (its trajectories never leave the envelope) and,
    with 100 steps, reaches the target law; clipping every state to the range clamps the noise at the first step and
    collapses the spread."""
    m, s = 2.0, 0.2

    def field(*, x, t):
        var = t**2 * s**2 + (1 - t) ** 2
        mean_x1 = m + (t * s**2 / var)[:, None] * (x - (t * m)[:, None])
        return (mean_x1 - x) / (1 - t)[:, None]

    eps = torch.randn(20000, 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    lo, hi = m - 5 * s, m + 5 * s
    for n in (10, 100):
        grid = grids.uniform(n, dtype=torch.float64)
        ours = solve_ode(field, eps, grid, method=clipped_euler(lo, hi, noise_bound=5.0))
        torch.testing.assert_close(ours, solve_ode(field, eps, grid, method=clipped_euler(-1e9, 1e9)))
        literal = solve_ode(field, eps, grid, method=clipped_euler(lo, hi))
        assert float(literal.std()) < 0.4 * s and float(literal.mean()) > m + 0.1  # most samples pile up at one value
    assert abs(float(ours.mean()) - m) < 0.01 and abs(float(ours.std()) / s - 1) < 0.03  # 100 Euler steps


def test_bad_ranges_and_states_name_the_argument():
    with pytest.raises(ValueError, match=r"^low, high:"):
        clipped_euler(1.0, 1.0)
    with pytest.raises(ValueError, match=r"^noise_bound:"):
        clipped_euler(0.0, 1.0, noise_bound=-1.0)
    with pytest.raises(ValueError, match=r"^mode:"):
        clipped_jvp_euler(0.0, 1.0, mode="fwd")
    state = JVPState(torch.zeros(3, 2), torch.ones(3, 2))
    with pytest.raises(ValueError, match=r"^state.x:"):
        scalar_vjp_euler(lambda *, x, t: x, state, torch.zeros(3), torch.ones(3))
