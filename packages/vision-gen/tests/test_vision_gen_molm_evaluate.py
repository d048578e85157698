"""MOLM's averaging and forgery metrics over many keys, on hand-built schemes with known answers: a watermark that a
forger transplants exactly, and an extractor whose reading ignores the image (its forgeries carry nothing, so they
score what clean images score, inside the chance interval over the keys' bits though far from 1/2 for one key)."""

from __future__ import annotations

import pytest
import torch

from flowlab.vision_gen.watermark.molm.evaluate import Scheme, averaging_metrics

BITS, SIZE = 8, 8


def _pattern(keys: torch.Tensor) -> torch.Tensor:
    """keys (B, M) -> an additive pattern (B, 1, S, S): bit m lights row m by +-0.1."""
    rows = (2 * keys.double() - 1) * 0.1
    return rows[:, None, :, None].expand(-1, 1, BITS, SIZE).float()


def _additive() -> Scheme:
    """Clean decode 0 (grey in [0, 1]) plus the key's pattern; read: each row's mean brightness above grey, rounded
    to tenths (so that a residual subtracted again reads as exactly 0, not as its rounding error)."""
    return Scheme(
        "additive",
        lambda z, k: _pattern(k) * 2,  # the [-1, 1] decode of 0.5 + pattern in [0, 1]
        lambda x: torch.round((x.mean(-1)[:, 0, :] - 0.5) * 10) * 10,
        BITS,
    )


def _blind(readout: torch.Tensor) -> Scheme:
    """Marks like `_additive` but reads the fixed bits `readout` (M,) from every image."""
    return Scheme("blind", _additive().mark, lambda x: (2 * readout.float() - 1).expand(x.shape[0], -1), BITS)


def _inputs(n: int = 12, pool: int = 20):
    z = torch.zeros(n, 1)
    clean = torch.zeros(n, 1, SIZE, SIZE)  # decodes in [-1, 1]: grey
    return torch.zeros(pool, 1), torch.zeros(pool, 1, SIZE, SIZE), z, clean


def test_a_transplantable_watermark_is_forged_and_averaged_away_for_every_key():
    keys = torch.randint(0, 2, (16, BITS), generator=torch.Generator().manual_seed(0))
    out = averaging_metrics(_additive(), *_inputs(), keys, (1, 10))
    assert out["forge1_bit_acc"] == 1.0 and out["forge10_bit_acc"] == 1.0
    assert out["forge10_bit_acc"] > out["forge_chance_hi"]
    expected = float((keys == 0).double().mean())  # the residual removed: rows back at grey, read as bit 0
    assert out["avg10_bit_acc"] == pytest.approx(expected)


def test_a_reading_that_ignores_the_image_scores_its_clean_rate_inside_chance_over_many_keys():
    gen = torch.Generator().manual_seed(1)
    readout = torch.randint(0, 2, (BITS,), generator=gen)
    keys = torch.randint(0, 2, (256, BITS), generator=gen)
    out = averaging_metrics(_blind(readout), *_inputs(), keys, (10,))
    expected = float((keys == readout).double().mean())  # the fixed reading against each key's bits
    assert out["forge10_bit_acc"] == pytest.approx(expected) == pytest.approx(out["forge_null_bit_acc"])
    assert out["forge_chance_lo"] < out["forge10_bit_acc"] < out["forge_chance_hi"]
    half = 2.576 * (0.25 / keys.numel()) ** 0.5  # 99 % interval over the 256 x 8 key bits, not the images
    assert out["forge_chance_hi"] == pytest.approx(0.5 + half)
    one = averaging_metrics(_blind(readout), *_inputs(), keys[:1], (10,))
    assert one["forge_chance_hi"] - one["forge_chance_lo"] > 0.9  # one 8-bit key decides almost nothing


def test_keys_of_the_wrong_shape_are_named():
    with pytest.raises(ValueError, match="keys"):
        averaging_metrics(_additive(), *_inputs(), torch.zeros(BITS, dtype=torch.long), (10,))
    with pytest.raises(ValueError, match="keys"):
        averaging_metrics(_additive(), *_inputs(), torch.zeros(2, BITS + 1, dtype=torch.long), (10,))
