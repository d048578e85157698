"""Offline-to-online fine-tuning: a replay buffer that starts as the offline dataset and grows with the transitions an
agent gathers in `n_envs` copies of the (noisy) environment, one batched policy call and one environment step per
training batch. Pass it to `train_agent` in place of the dataset."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from flowlab.core.distributions import randint
from flowlab.rl_control.data import OfflineDataset
from flowlab.rl_control.envs.control import NoiseSpec, make_vector_env, noisy_step

__all__ = ["OnlineReplay"]


class OnlineReplay:
    """The offline `dataset` plus up to `steps * n_envs` online transitions of `agent` acting in `env_id`.

    `sampler` (the `train_agent` data source) steps every environment copy once with `agent.act`, stores the
    transitions and returns a uniform minibatch over everything stored. Finished episodes' undiscounted returns (with
    the reward noise) are kept in `episode_returns`; `max_episode_steps` caps the online episodes (None: the
    environment's own limit). The environment state is not checkpointed: an interrupted online phase restarts from the
    offline dataset."""

    def __init__(
        self,
        dataset: OfflineDataset,
        agent: torch.nn.Module,
        env_id: str,
        *,
        steps: int,
        seed: int,
        n_envs: int = 1,
        noise: NoiseSpec = NoiseSpec(),
        max_episode_steps: int | None = None,
    ) -> None:
        if steps < 1:
            raise ValueError(f"steps: expected >= 1 online steps, got {steps}")
        config = getattr(agent, "config", None)
        if config is not None and config.next_action != "policy":
            raise ValueError("agent: online training needs an agent with next_action='policy' (it acts itself)")
        self.env = make_vector_env(env_id, n_envs, max_episode_steps=max_episode_steps)
        spaces = {"observations": self.env.single_observation_space, "actions": self.env.single_action_space}
        for name, dim in (("observations", dataset.obs_dim), ("actions", dataset.act_dim)):
            if spaces[name].shape != (dim,):
                self.env.close()
                raise ValueError(f"env: {env_id!r} {name} have shape {spaces[name].shape}, the dataset's ({dim},)")
        self.dataset, self.agent, self.noise = dataset, agent, noise
        self.n_envs, self.capacity = n_envs, len(dataset) + steps * n_envs
        self.rng = np.random.default_rng(seed)
        self.obs, _ = self.env.reset(seed=seed)
        self.running = np.zeros(n_envs)
        self.episode_returns: list[float] = []
        self.size = len(dataset)
        self._buffer: dict[str, torch.Tensor] | None = None
        self._layout: tuple[float, str] | None = None

    @property
    def obs_dim(self) -> int:
        """The observation size of the offline dataset."""
        return self.dataset.obs_dim

    @property
    def act_dim(self) -> int:
        """The action size of the offline dataset."""
        return self.dataset.act_dim

    def sampler(
        self, batch_size: int, *, device: torch.device | str = "cpu", reward_scale: float = 1.0
    ) -> Callable[[int, torch.Generator], dict[str, torch.Tensor]]:
        """`data(step, generator) -> batch` as `OfflineDataset.sampler`, taking one environment step per call. Every
        sampler of one replay shares its buffer, so it needs the same `reward_scale` and `device` each time."""
        if batch_size < 1:
            raise ValueError(f"batch_size: expected >= 1, got {batch_size}")
        buf = self._storage(float(reward_scale), torch.device(device))

        def data(step: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
            if self.size + self.n_envs > self.capacity:
                raise RuntimeError(f"OnlineReplay: the buffer is full ({self.capacity} transitions); raise `steps`")
            with torch.no_grad():
                obs_t = torch.as_tensor(self.obs, dtype=torch.float32, device=device)
                actions = self.agent.act(obs_t, generator=generator).cpu().numpy()
            obs2, rew, term, trunc = noisy_step(self.env, actions, self.noise, self.rng)
            new = {"obs": self.obs, "actions": actions, "rewards": rew / reward_scale, "next_obs": obs2, "masks": ~term}
            sl = slice(self.size, self.size + self.n_envs)
            for key, value in new.items():
                buf[key][sl] = torch.as_tensor(np.asarray(value, dtype=np.float32), device=device)
            self.size += self.n_envs
            self.running += rew
            done = term | trunc
            self.episode_returns.extend(float(r) for r in self.running[done])
            self.running[done] = 0.0
            self.obs = self.env.reset(options={"reset_mask": done})[0] if done.any() else obs2
            idx = randint(self.size, (batch_size,), generator=generator, device=device)
            return {k: v[idx] for k, v in buf.items()}

        return data

    def _storage(self, reward_scale: float, device: torch.device) -> dict[str, torch.Tensor]:
        """The buffer, built on first use (offline rows divided by `reward_scale`, room for the online rows)."""
        layout = (reward_scale, str(device))
        if self._buffer is not None:
            if layout != self._layout:
                raise ValueError(
                    f"reward_scale, device: this replay's buffer holds rewards / {self._layout[0]} on "
                    f"{self._layout[1]}, got {reward_scale} on {device}"
                )
            return self._buffer
        offline = self.dataset.tensors(device=device, reward_scale=reward_scale)
        offline.pop("next_actions", None)  # online rows have none: the agent picks its own next actions
        buf = {}
        for key, rows in offline.items():
            buf[key] = rows.new_zeros((self.capacity, *rows.shape[1:]))
            buf[key][: len(rows)] = rows
        self._buffer, self._layout = buf, layout
        return buf

    def close(self) -> None:
        """Closes the vectorised environment."""
        self.env.close()
