"""The bundled photos: shapes and ranges, the split by image, and random crops (shape, range, seeding, windows)."""

from __future__ import annotations

import pytest
import torch

from flowlab.vision_gen.kit.photos import PHOTOS, load_photo, load_photos, photo_crops, photo_split, random_crops


def test_sklearn_sample_images_are_427_by_640_rgb():
    for name in ("china", "flower"):
        x = load_photo(name)
        assert x.shape == (3, 427, 640) and x.dtype == torch.float32
        assert not torch.equal(x[0], x[1])  # genuinely colour


def test_every_photo_loads_in_unit_range():
    photos = load_photos()
    assert tuple(photos) == PHOTOS
    for name, x in photos.items():
        assert x.dim() == 3 and x.shape[0] == 3 and min(x.shape[1:]) >= 300, name
        assert x.dtype == torch.float32 and float(x.min()) >= 0 and float(x.max()) <= 1, name
        assert float(x.max()) > 0.5, name  # decoded, not blank
    assert torch.equal(photos["camera"][0], photos["camera"][2])  # grayscale replicated


def test_split_is_disjoint_covering_nonempty_and_seeded():
    s = photo_split()
    parts = [set(s[k]) for k in ("train", "val", "test")]
    assert all(parts) and sum(map(len, parts)) == len(PHOTOS) and set.union(*parts) == set(PHOTOS)
    assert photo_split(seed=0) == s
    assert any(photo_split(seed=k) != s for k in range(1, 4))
    small = photo_split(("china", "flower", "rocket"), seed=3)
    assert sorted(len(v) for v in small.values()) == [1, 1, 1]


def test_crops_shape_range_and_seeding():
    a = photo_crops("train", size=24, n=40, seed=1)
    assert a.x.shape == (40, 3, 24, 24) and a.y.shape == (40,) and a.y.dtype == torch.long
    assert float(a.x.min()) >= -1 and float(a.x.max()) <= 1
    assert int(a.y.max()) < len(photo_split()["train"]) and len(a.y.unique()) > 1
    b = photo_crops("train", size=24, n=40, seed=1)
    assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
    assert not torch.equal(a.x, photo_crops("train", size=24, n=40, seed=2).x)
    g = photo_crops("test", size=16, n=8, grayscale=True)
    assert g.x.shape == (8, 1, 16, 16)


def test_photo_crops_label_names_the_source_photo():
    crops = photo_crops("val", size=20, n=6, seed=5)
    names = photo_split()["val"]
    for x, y in zip(crops.x, crops.y):
        src = load_photo(names[int(y)]) * 2 - 1
        inside = src[:, : src.shape[1] - 19, : src.shape[2] - 19]
        candidates = (inside == x[:, :1, :1]).all(dim=0).nonzero().tolist()  # where the corner pixel matches
        assert any(torch.equal(src[:, r : r + 20, c : c + 20], x) for r, c in candidates)


def test_random_crop_is_the_window_of_its_source():
    # coordinate images: channel 0 holds the row, channel 1 the column, channel 2 the photo id
    shapes = [(40, 50), (33, 60), (45, 45)]
    images = {}
    for k, (h, w) in enumerate(shapes):
        rows = torch.arange(h, dtype=torch.float32)[:, None].expand(h, w)
        cols = torch.arange(w, dtype=torch.float32)[None, :].expand(h, w)
        images[f"p{k}"] = torch.stack([rows, cols, torch.full((h, w), float(k))])
    size = 33
    crops = random_crops(images, size, 300, generator=torch.Generator().manual_seed(0))
    assert crops.shape == (300, 3, size, size)
    k = crops[:, 2, 0, 0].long()
    top, left = crops[:, 0, 0, 0].long(), crops[:, 1, 0, 0].long()
    assert set(k.tolist()) == {0, 1, 2}
    for i in range(len(crops)):
        assert torch.equal(crops[i], images[f"p{k[i]}"][:, top[i] : top[i] + size, left[i] : left[i] + size])
    limits = torch.tensor(shapes)[k] - size
    assert bool((top <= limits[:, 0]).all()) and bool((left <= limits[:, 1]).all())
    assert int(top[k == 1].max()) == 0 and len(left[k == 1].unique()) > 10  # photo 1 has exactly one row offset


def test_random_crops_rejects_size_larger_than_a_photo():
    photos = [load_photo("chelsea"), load_photo("china")]  # chelsea is 300 x 451
    with pytest.raises(ValueError, match=r"size: .*300.*got 301"):
        random_crops(photos, 301, 2, generator=torch.Generator())
    assert random_crops(photos, 300, 2, generator=torch.Generator()).shape == (2, 3, 300, 300)


_PHOTO = torch.rand(3, 20, 20)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: random_crops([_PHOTO], 0, 4, generator=torch.Generator()), "size"),
        (lambda: random_crops([_PHOTO], 8, 0, generator=torch.Generator()), "n"),
        (lambda: random_crops([_PHOTO], 8, 4, generator=0), "generator"),
        (lambda: random_crops([], 8, 4, generator=torch.Generator()), "images"),
        (lambda: random_crops([_PHOTO[0]], 8, 4, generator=torch.Generator()), "images"),
        (lambda: random_crops([_PHOTO, _PHOTO[:1]], 8, 4, generator=torch.Generator()), "images"),
        (lambda: random_crops([_PHOTO], 8.0, 4, generator=torch.Generator()), "size"),
        (lambda: load_photo("lena"), "name"),
        (lambda: load_photos("china"), "names"),
        (lambda: photo_split(("china", "china", "flower")), "names"),
        (lambda: photo_split(fractions=(0.5, 0.5)), "fractions"),
        (lambda: photo_split(fractions=(0.9, 0.2, -0.1)), "fractions"),
        (lambda: photo_crops("holdout"), "split"),
        (lambda: photo_crops(size=301), "size"),
    ],
)
def test_bad_inputs_are_rejected(call, match):
    with pytest.raises(ValueError, match=rf"^{match}: "):
        call()
