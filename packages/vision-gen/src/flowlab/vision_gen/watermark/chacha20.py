"""ChaCha20 keystream (RFC 8439), vectorised over blocks and streams with numpy uint32 arithmetic.

Only the keystream is needed: Gaussian Shading XORs watermark bits with it. Written from the RFC's description.
"""

from __future__ import annotations

import numpy as np

__all__ = ["chacha20_keystream"]

_CONST = np.array([0x61707865, 0x3320646E, 0x79622D32, 0x6B206574], dtype=np.uint32)


def _rotl(x: np.ndarray, n: int) -> np.ndarray:
    return (x << np.uint32(n)) | (x >> np.uint32(32 - n))


def _quarter(s: np.ndarray, a: int, b: int, c: int, d: int) -> None:
    s[..., a] += s[..., b]
    s[..., d] = _rotl(s[..., d] ^ s[..., a], 16)
    s[..., c] += s[..., d]
    s[..., b] = _rotl(s[..., b] ^ s[..., c], 12)
    s[..., a] += s[..., b]
    s[..., d] = _rotl(s[..., d] ^ s[..., a], 8)
    s[..., c] += s[..., d]
    s[..., b] = _rotl(s[..., b] ^ s[..., c], 7)


def chacha20_keystream(key: bytes, nonces: np.ndarray, n_bytes: int, *, counter: int = 0) -> np.ndarray:
    """Keystream bytes for one 32-byte key and several 12-byte nonces.

    nonces: (B, 12) uint8 -> (B, n_bytes) uint8, block counter starting at `counter`.
    """
    if not isinstance(key, bytes | bytearray) or len(key) != 32:
        raise ValueError("key: expected 32 bytes")
    nonces = np.asarray(nonces, dtype=np.uint8)
    if nonces.ndim != 2 or nonces.shape[1] != 12:
        raise ValueError(f"nonces: expected a (B, 12) uint8 array, got shape {nonces.shape}")
    b, n_blocks = nonces.shape[0], -(-n_bytes // 64)
    state = np.empty((b, n_blocks, 16), dtype=np.uint32)
    state[..., :4] = _CONST
    state[..., 4:12] = np.frombuffer(bytes(key), dtype="<u4")
    state[..., 12] = (counter + np.arange(n_blocks, dtype=np.uint64)).astype(np.uint32)
    state[..., 13:] = nonces.copy().view("<u4")[:, None, :]
    work = state.copy()
    with np.errstate(over="ignore"):
        for _ in range(10):
            _quarter(work, 0, 4, 8, 12)
            _quarter(work, 1, 5, 9, 13)
            _quarter(work, 2, 6, 10, 14)
            _quarter(work, 3, 7, 11, 15)
            _quarter(work, 0, 5, 10, 15)
            _quarter(work, 1, 6, 11, 12)
            _quarter(work, 2, 7, 8, 13)
            _quarter(work, 3, 4, 9, 14)
        work += state
    return work.astype("<u4").view(np.uint8).reshape(b, n_blocks * 64)[:, :n_bytes]
