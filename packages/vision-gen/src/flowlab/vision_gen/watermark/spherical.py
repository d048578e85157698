"""Spherical Watermark (Hu et al., ICLR 2026): F2 mixing of a repeated message with random padding, a +-1 code,
a secret blockwise Haar rotation and a chi radius, so the watermarked latent is (per image) a N(0, I) sample.

Embedding (per image): x = [m, ..., m (N copies), r] with fresh padding r ~ Bernoulli(1/2)^{l_r};
z1 = T x mod 2 with T = [[I, R], [0, P]] (top = m_rep XOR R r, bottom = P r); v = 2 z1 - 1; V = v reshaped
row-major to (l_c, l_x / l_c); U = C V with C Haar on O(l_c); every column gets radius rho_b, rho_b^2 ~ chi^2(l_c)
(or one rho^2 ~ chi^2(l_x) with radius="global"). Extraction: undo the rotation, read signs, x = T^{-1} c mod 2
(T^{-1} = [[I, R P^T], [0, P^T]]), majority vote over the N copies. R is stored sparsely: row i of the top lists
its `sparsity` padding positions; copy k of bit j uses positions pi_j(k s) .. pi_j(k s + s - 1) of a permutation
pi_j of the padding, so the copies of one bit use disjoint padding bits.

Known property (vision-gen--spherical-watermark.md, section 3.5): with a fixed message the code is linear in l_r
padding signs, so the covariance of many latents of one user has rank <= l_r (+ a radius term); random messages
do not have this structure. "Lossless" means distribution-preserving, not the same image for a given seed.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass
from typing import Literal

import torch

from flowlab.vision_gen.watermark.base import (
    DetectionResult,
    ExtractResult,
    binomial_detection,
    bits_tensor,
    check_key_tensor,
    check_latents,
    read_key_folder,
    write_key_folder,
)

__all__ = ["SphericalConfig", "SphericalWatermark", "f2_matrix", "haar_orthogonal"]


@dataclass(frozen=True)
class SphericalConfig:
    """latent_shape: shape of one latent (l_x = prod); l_x = repetitions * message_bits + padding_bits.

    block_size: rotation block l_c (default floor(sqrt(l_x)) when it divides l_x); sparsity: padding bits per top
    row of R; permute_padding: P a random permutation instead of I; radius: "per_block" or "global".
    mixing / rotation: False gives the no-mixing (R = 0) and no-rotation (C = I) ablations.
    """

    latent_shape: tuple[int, ...]
    message_bits: int
    repetitions: int
    padding_bits: int
    block_size: int | None = None
    sparsity: int = 1
    permute_padding: bool = False
    radius: Literal["per_block", "global"] = "per_block"
    mixing: bool = True
    rotation: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "latent_shape", tuple(int(s) for s in self.latent_shape))
        for name in ("message_bits", "repetitions", "padding_bits", "sparsity"):
            v = getattr(self, name)
            if not (isinstance(v, int) and v >= 1):
                raise ValueError(f"{name}: expected a positive integer, got {v!r}")
        if self.repetitions % 2 == 0:
            raise ValueError(f"repetitions: expected an odd number (majority vote), got {self.repetitions}")
        l_x = self.latent_size
        if self.repetitions * self.message_bits + self.padding_bits != l_x:
            raise ValueError(
                f"latent_shape: l_x = {l_x} must equal repetitions*message_bits + padding_bits = "
                f"{self.repetitions}*{self.message_bits} + {self.padding_bits}"
            )
        if self.repetitions * self.sparsity > self.padding_bits:
            raise ValueError(
                f"sparsity: repetitions*sparsity = {self.repetitions * self.sparsity} exceeds padding_bits "
                f"{self.padding_bits}"
            )
        if self.block_size is None:
            b = math.isqrt(l_x)
            if l_x % b:
                raise ValueError(f"block_size: floor(sqrt(l_x)) = {b} does not divide l_x = {l_x}; give one")
            object.__setattr__(self, "block_size", b)
        if not (isinstance(self.block_size, int) and self.block_size >= 1 and l_x % self.block_size == 0):
            raise ValueError(f"block_size: expected a divisor of l_x = {l_x}, got {self.block_size!r}")
        if self.radius not in ("per_block", "global"):
            raise ValueError(f"radius: expected 'per_block' or 'global', got {self.radius!r}")

    @property
    def latent_size(self) -> int:
        """The latent length l_x, the product of `latent_shape`."""
        return math.prod(self.latent_shape)

    @classmethod
    def for_latent(cls, latent_shape: tuple[int, ...], message_bits: int, repetitions: int, **kw) -> SphericalConfig:
        """Padding fills the rest: padding_bits = l_x - repetitions * message_bits."""
        l_x = math.prod(latent_shape)
        if repetitions * message_bits >= l_x:
            raise ValueError(
                f"message_bits: {message_bits} bits x {repetitions} copies exceed the capacity of a latent of "
                f"{l_x} values (leave room for padding)"
            )
        return cls(tuple(latent_shape), message_bits, repetitions, l_x - repetitions * message_bits, **kw)

    @classmethod
    def stable_diffusion(cls, **kw) -> SphericalConfig:
        """Paper defaults for a 4x64x64 SD latent: N = 31, l_m = 512, l_r = 512, l_c = 128, s = 1."""
        return cls((4, 64, 64), 512, 31, 512, block_size=128, **kw)

    @classmethod
    def digits16(cls, **kw) -> SphericalConfig:
        """The small configuration for 1x16x16 digits: N = 7, l_m = 32, l_r = 32, l_c = 16."""
        return cls((1, 16, 16), 32, 7, 32, block_size=16, **kw)


def haar_orthogonal(n: int, *, generator: torch.Generator) -> torch.Tensor:
    """(n, n) float64 Haar-distributed orthogonal matrix: QR of a Gaussian matrix with sign(diag R) folded into Q."""
    a = torch.randn(n, n, generator=generator, dtype=torch.float64)
    q, r = torch.linalg.qr(a)
    return q * torch.sign(torch.diagonal(r))[None, :]


def f2_matrix(r_index: torch.Tensor, perm: torch.Tensor, *, inverse: bool = False) -> torch.Tensor:
    """Dense T = [[I, R], [0, P]] (or T^{-1} = [[I, R P^T], [0, P^T]]) over F2 as an int64 (l_x, l_x) matrix.

    r_index: (N l_m, s) padding positions of each top row; perm: (l_r,) with (P r)_i = r[perm[i]]. For tests.
    """
    top, l_r = r_index.shape[0], perm.numel()
    R = torch.zeros(top, l_r, dtype=torch.long)
    R.scatter_(1, r_index, 1)
    P = torch.zeros(l_r, l_r, dtype=torch.long)
    P[torch.arange(l_r), perm] = 1
    if inverse:
        R, P = R @ P.T, P.T
    T = torch.zeros(top + l_r, top + l_r, dtype=torch.long)
    T[:top, :top] = torch.eye(top, dtype=torch.long)
    T[:top, top:] = R
    T[top:, top:] = P
    return T


class SphericalWatermark:
    """The secret signature K = (R, P, C) of a `SphericalConfig` and its embed / extract / detect operations."""

    method = "spherical"

    def __init__(self, config: SphericalConfig, r_index: torch.Tensor, perm: torch.Tensor, rotation: torch.Tensor):
        self.config = config
        top = config.repetitions * config.message_bits
        self.r_index = check_key_tensor({"r_index": r_index}, "r_index", (top, config.sparsity)).long()
        self.perm = check_key_tensor({"perm": perm}, "perm", (config.padding_bits,)).long()
        self.rotation = check_key_tensor(
            {"rotation": rotation}, "rotation", (config.block_size, config.block_size)
        ).double()
        if bool((self.r_index < 0).any() | (self.r_index >= config.padding_bits).any()):
            raise ValueError(f"key: r_index entries must lie in [0, {config.padding_bits})")
        if not torch.equal(torch.sort(self.perm).values, torch.arange(config.padding_bits)):
            raise ValueError("key: perm is not a permutation of the padding positions")
        eye = torch.eye(config.block_size, dtype=torch.float64)
        if not torch.allclose(self.rotation.T @ self.rotation, eye, atol=1e-8):
            raise ValueError("key: rotation is not orthogonal")
        self.inv_perm = torch.argsort(self.perm)

    @property
    def latent_shape(self) -> tuple[int, ...]:
        """The shape of one latent, from the config."""
        return self.config.latent_shape

    @property
    def message_bits(self) -> int:
        """The message length l_m, from the config."""
        return self.config.message_bits

    # ----------------------------------------------------------------------------------------------- key material
    @classmethod
    def from_seed(cls, config: SphericalConfig, seed: int) -> SphericalWatermark:
        """Draw the key from `seed` (deterministic on every device: generated on CPU)."""
        g = torch.Generator().manual_seed(int(seed))
        n, lm, lr, s = config.repetitions, config.message_bits, config.padding_bits, config.sparsity
        perms = torch.argsort(torch.rand(lm, lr, generator=g), dim=1)  # pi_j for every message bit j
        # row k*lm + j (copy k of bit j) takes pi_j(k s .. k s + s - 1)
        r_index = perms[:, : n * s].reshape(lm, n, s).permute(1, 0, 2).reshape(n * lm, s).contiguous()
        perm = torch.randperm(lr, generator=g) if config.permute_padding else torch.arange(lr)
        c = haar_orthogonal(config.block_size, generator=g)
        if not config.rotation:
            c = torch.eye(config.block_size, dtype=torch.float64)
        return cls(config, r_index, perm, c)

    def state_dict(self) -> dict:
        """The config (as a dict) and the signature tensors `r_index`, `perm` and `rotation`."""
        return {"config": asdict(self.config), "r_index": self.r_index, "perm": self.perm, "rotation": self.rotation}

    @classmethod
    def from_state_dict(cls, state: dict) -> SphericalWatermark:
        """The watermark of a `state_dict`."""
        cfg = dict(state["config"])
        cfg["latent_shape"] = tuple(cfg["latent_shape"])
        return cls(SphericalConfig(**cfg), state["r_index"], state["perm"], state["rotation"])

    def save(self, path: str | os.PathLike) -> None:
        """Writes the signature as a key folder at `path`, for `load`."""
        st = self.state_dict()
        write_key_folder(path, self.method, st.pop("config"), st)

    @classmethod
    def load(cls, path: str | os.PathLike) -> SphericalWatermark:
        """The watermark `save` wrote to `path`; ValueError for another method's key or a malformed config."""
        method, config, tensors = read_key_folder(path)
        if method != cls.method:
            raise ValueError(f"key: {path} holds a {method!r} key, expected {cls.method!r}")
        try:
            cfg = SphericalConfig(**{**config, "latent_shape": tuple(config["latent_shape"])})
        except (TypeError, KeyError) as err:
            raise ValueError(f"key: config in {path} is malformed ({err})") from err
        return cls(cfg, tensors.get("r_index"), tensors.get("perm"), tensors.get("rotation"))

    # ------------------------------------------------------------------------------------------------- F2 code
    def encode_bits(self, messages: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        """z1 = T [m_rep; r] mod 2. messages: (B, l_m), padding: (B, l_r) bits -> (B, l_x) int64 bits."""
        cfg = self.config
        m = bits_tensor(messages, cfg.message_bits)
        r = bits_tensor(padding, cfg.padding_bits, m.device)
        top = m.repeat(1, cfg.repetitions)
        if cfg.mixing:
            top = top ^ (r[:, self.r_index.to(m.device)].sum(-1) % 2)
        return torch.cat([top, r[:, self.perm.to(m.device)]], dim=1)

    def decode_bits(self, code: torch.Tensor) -> torch.Tensor:
        """x = T^{-1} c mod 2. code: (B, l_x) bits -> (B, N, l_m) the message copies."""
        cfg = self.config
        n_top = cfg.repetitions * cfg.message_bits
        top, bottom = code[:, :n_top], code[:, n_top:]
        r = bottom[:, self.inv_perm.to(code.device)]
        if cfg.mixing:
            top = top ^ (r[:, self.r_index.to(code.device)].sum(-1) % 2)
        return top.reshape(code.shape[0], cfg.repetitions, cfg.message_bits)

    # ----------------------------------------------------------------------------------------- embed / extract
    def embed(
        self,
        messages: torch.Tensor,
        *,
        generator: torch.Generator | None = None,
        dtype: torch.dtype = torch.float32,
        padding: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """messages: (B, l_m) bits -> watermarked initial latents (B, *latent_shape) on the messages' device.

        Fresh padding bits and radii come from `generator` (or `padding`: (B, l_r) given bits, for tests). The
        rotation is applied in `dtype`.
        """
        cfg = self.config
        m = bits_tensor(messages, cfg.message_bits)
        b, dev = m.shape[0], m.device
        if padding is None:
            padding = torch.randint(0, 2, (b, cfg.padding_bits), generator=generator, device=dev)
        v = 2.0 * self.encode_bits(m, padding).to(dtype) - 1.0
        lc = cfg.block_size
        nb = cfg.latent_size // lc
        u = self.rotation.to(dev, dtype) @ v.reshape(b, lc, nb)  # (B, l_c, l_x/l_c), column norms sqrt(l_c)
        g = torch.randn(b, lc, nb, generator=generator, device=dev, dtype=dtype)
        if cfg.radius == "per_block":
            z = u * (g.norm(dim=1, keepdim=True) / math.sqrt(lc))
        else:
            z = u * (g.flatten(1).norm(dim=1)[:, None, None] / math.sqrt(cfg.latent_size))
        return z.reshape(b, *cfg.latent_shape).to(dtype)

    def code_signs(self, latents: torch.Tensor) -> torch.Tensor:
        """S = C^T Z per block, flattened: (B, *latent_shape) -> (B, l_x) in the latents' float dtype (signs carry
        the code)."""
        z = check_latents(latents, self.latent_shape)
        z = z if z.is_floating_point() else z.float()
        lc = self.config.block_size
        s = self.rotation.T.to(z.device, z.dtype) @ z.reshape(z.shape[0], lc, -1)
        return s.reshape(z.shape[0], -1)

    def extract(self, latents: torch.Tensor) -> ExtractResult:
        """latents: (B, *latent_shape) recovered initial noise -> decoded message bits (majority vote)."""
        code = (self.code_signs(latents) > 0).long()
        copies = self.decode_bits(code)
        votes = copies.double().mean(1)
        return ExtractResult(bits=(votes > 0.5).long(), copies=copies, votes=votes)

    def detect(self, latents: torch.Tensor, message: torch.Tensor, *, fpr: float = 0.01) -> DetectionResult:
        """Matching bits to `message` ((l_m,) or (B, l_m)) against the analytic Binomial(l_m, 1/2) threshold."""
        m = message if message.dim() == 2 else message[None]
        bits = self.extract(latents).bits
        m = bits_tensor(m, self.message_bits, bits.device).expand_as(bits)
        return binomial_detection((bits == m).sum(-1), self.message_bits, fpr)

    def trace(
        self, latents: torch.Tensor, users: torch.Tensor, *, fpr: float = 0.01
    ) -> tuple[torch.Tensor, DetectionResult]:
        """Best-matching user among `users` (U, l_m) and detection at FPR/U (Bonferroni): (user index (B,), result)."""
        bits = self.extract(latents).bits
        u = bits_tensor(users, self.message_bits, bits.device)
        matches = (bits[:, None, :] == u[None]).sum(-1)
        best, idx = matches.max(dim=1)
        return idx, binomial_detection(best, self.message_bits, fpr / u.shape[0])
