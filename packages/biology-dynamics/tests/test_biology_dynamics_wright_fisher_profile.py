"""Profile conditioning on the motifs task: the CNN reads the per-window oracle profile (a changed profile changes
its sequence's logits), training batches carry each sequence's exact profile, sampling takes target
profiles, evaluation scores samples against the held-out profiles, and bad profiles (NaN, wrong shape, wrong
number of motifs, a class-conditional run, an unreadable file) are clear errors naming the argument."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from flowlab.biology_dynamics.wright_fisher.motifs import load_motifs, profile, read_profile
from flowlab.biology_dynamics.wright_fisher.nets import SequenceCNN, profile_channels
from flowlab.biology_dynamics.wright_fisher.run import (
    DNARun,
    class_profile_mse,
    evaluate_run,
    motif_profiles,
    network,
    sample_run,
    training_batch,
)
from flowlab.core.nets import seeded_init

RUN = DNARun(task="motifs", domain="masked", length=40, width=16, batch=8, steps=2, condition="profile")


def _generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _cnn(**kw) -> SequenceCNN:
    with seeded_init(0):
        return SequenceCNN(4, width=16, stacks=1, profile_motifs=2, window=10, **kw)


def test_profile_channels_repeat_each_window_over_its_letters():
    p = torch.tensor([[[10.0, -20.0, 5.0]]])  # (1, 1, 3) windows of 4 letters in a length of 14
    per_letter = profile_channels(p, 14, 4)
    assert per_letter.shape == (1, 1, 14)
    expected = [1.0] * 4 + [-2.0] * 4 + [0.5] * 4 + [0.0] * 2
    assert per_letter[0, 0].tolist() == pytest.approx(expected)
    with pytest.raises(ValueError, match="profile"):
        profile_channels(p, 11, 4)  # 3 windows of 4 do not fit 11 letters


def test_a_changed_profile_changes_its_sequences_logits():
    net = _cnn().eval()
    x = torch.nn.functional.one_hot(torch.randint(4, (3, 80), generator=_generator(1)), 4).float()
    t = torch.full((3,), 0.5)
    p = torch.randn(3, 2, 8, generator=_generator(2), dtype=torch.float64) * 8
    base = net(x=x, t=t, cond=p)
    assert base.shape == (3, 80, 4) and torch.isfinite(base).all()
    changed = p.clone()
    changed[1, 0, 0] += 10.0  # the first window of sequence 1, motif 0
    moved = (net(x=x, t=t, cond=changed) - base).abs().amax(-1)  # (3, 80)
    assert moved[[0, 2]].max() == 0  # other sequences do not see it
    assert moved[1, :10].min() > 0  # its window's letters do
    assert net.inp.in_channels == 4 + 2  # the letters and a channel per motif


def test_bad_profiles_given_to_the_network_name_cond():
    net = _cnn()
    x, t = torch.rand(2, 40, 4), torch.rand(2)
    good = torch.zeros(2, 2, 4)
    assert net(x=x, t=t, cond=good).shape == (2, 40, 4)
    nan = good.clone()
    nan[1, 1, 3] = float("nan")
    for cond, match in (
        (nan, "cond: the profiles hold NaN or inf"),
        (good[:, :1], r"cond: expected \(2, 2, 4\) float profiles .* got \(2, 1, 4\)"),  # one motif too few
        (good[:, :, :3], r"got \(2, 2, 3\)"),  # a window too few
        (good[:1], r"got \(1, 2, 4\)"),  # one profile for two sequences
        (good.long(), "float profiles"),
        (torch.tensor([0, 1]), r"got \(2,\)"),  # class labels
        (None, "got NoneType"),
    ):
        with pytest.raises(ValueError, match=match):
            net(x=x, t=t, cond=cond)
    with pytest.raises(ValueError, match="classes, profile_motifs: condition on the class or on the profile"):
        SequenceCNN(4, classes=2, profile_motifs=2)


def test_training_batches_carry_the_oracle_profile_of_each_sequence():
    x, cond = training_batch(RUN, 16, _generator(3))
    p = cond["cond"]
    assert p.shape == (16, 2, 2) and p.dtype == torch.float32
    exact = profile(x, load_motifs(["MA0079.5", "MA0018.5"]), window=20)
    torch.testing.assert_close(p, exact.float())
    torch.testing.assert_close(motif_profiles(RUN, x), exact, rtol=0, atol=0)
    same_x, labels = training_batch(_class(RUN), 16, _generator(3))
    assert torch.equal(x, same_x) and labels["cond"].dtype == torch.int64  # the class-conditional run's sequences


def _class(run: DNARun) -> DNARun:
    return DNARun.from_mapping({**run.to_dict(), "condition": "class"})


def test_run_settings_for_profiles():
    with pytest.raises(ValueError, match="condition: only the motifs task has profiles"):
        DNARun(task="toy-simplex", condition="profile")
    with pytest.raises(ValueError, match="condition"):
        DNARun(condition="pwm")
    with pytest.raises(ValueError, match="window: expected an int >= 1"):
        DNARun(window=0)
    net = network(RUN)
    assert isinstance(net, SequenceCNN) and (net.profile_motifs, net.window, net.classes) == (2, 20, 0)


def test_sampling_takes_target_profiles_and_refuses_bad_ones():
    net = network(RUN).eval()
    x, _ = training_batch(RUN, 5, _generator(4))
    targets = motif_profiles(RUN, x)
    samples = sample_run(RUN, net, profile=targets, steps=2)
    assert samples.shape == (5, 40) and samples.dtype == torch.int64
    assert torch.equal(sample_run(RUN, net, 5, profile=targets, steps=2), samples)  # seeded
    nan = targets.clone()
    nan[2, 1, 0] = float("nan")
    cases = (
        (dict(profile=nan), r"profile: 1 NaN or inf entries, the first at \(b, motif, window\) = \(2, 1, 0\)"),
        (dict(profile=targets[:, :1]), r"profile: expected shape \(B, 2, 2\), got \(5, 1, 2\)"),  # motifs
        (dict(profile=targets[:, :, :1]), r"profile: expected shape \(B, 2, 2\), got \(5, 2, 1\)"),  # windows
        (dict(profile=targets[0]), r"profile: expected a \(B, 2, 2\) float tensor"),
        (dict(profile=targets.long()), "float tensor"),
        (dict(profile=targets, n=3), "n, profile: expected one target profile per sequence, got 5 for n = 3"),
        (dict(), r"profile: this run is profile-conditional; expected \(100, 2, 2\) target profiles"),
        (dict(profile=targets, label=1), "label: this run is profile-conditional"),
    )
    for kw, match in cases:
        with pytest.raises(ValueError, match=match):
            sample_run(RUN, net, steps=2, **kw)
    class_run = _class(RUN)
    with pytest.raises(ValueError, match=r"profile: only a profile-conditional run .* motif run is class-conditional"):
        sample_run(class_run, network(class_run), profile=targets, steps=2)
    toy = DNARun(task="toy-simplex", length=2, width=8)
    with pytest.raises(ValueError, match=r"profile: only a profile-conditional run .* task is 'toy-simplex'"):
        sample_run(toy, network(toy), profile=targets, steps=2)


def test_class_profile_mse_is_the_mean_over_same_class_pairs():
    g = _generator(5)
    a, b = torch.randn(7, 2, 3, generator=g), torch.randn(9, 2, 3, generator=g)
    a_labels, b_labels = torch.tensor([0, 1, 0, 1, 1, 0, 1]), torch.tensor([1, 1, 0, 0, 1, 1, 1, 0, 1])

    def brute(p, p_labels, targets, labels, distinct):
        per_target = []
        for j in range(len(targets)):
            errors = [((p[i] - targets[j]) ** 2).mean() for i in range(len(p))
                      if p_labels[i] == labels[j] and not (distinct and i == j)]  # fmt: skip
            per_target.append(torch.stack(errors).mean())
        return float(torch.stack(per_target).mean())

    assert class_profile_mse(a, a_labels, b, b_labels) == pytest.approx(brute(a, a_labels, b, b_labels, False))
    assert class_profile_mse(b, b_labels, b, b_labels, distinct=True) == pytest.approx(
        brute(b, b_labels, b, b_labels, True)
    )
    assert class_profile_mse(b, b_labels, b, b_labels) < class_profile_mse(b, b_labels, b, b_labels, distinct=True)
    assert np.isnan(class_profile_mse(a[:1], a_labels[:1], a[:1], a_labels[:1], distinct=True))


def test_evaluate_scores_samples_against_the_held_out_profiles():
    net = network(RUN).eval()
    scores = evaluate_run(RUN, net, n=8, steps=2)
    assert set(scores) == {"nats", "hit_rate", "profile_mse", "data_profile_mse"}
    assert all(np.isfinite(v) for v in scores.values())
    assert scores == evaluate_run(RUN, net, n=8, steps=2)  # seeded
    class_run = _class(RUN)
    class_scores = evaluate_run(class_run, network(class_run).eval(), n=8, steps=2)
    assert set(class_scores) == set(scores)
    assert class_scores["data_profile_mse"] == scores["data_profile_mse"]  # the same held-out targets


def test_read_profile_round_trips_npy_and_pt_and_refuses_other_files(tmp_path):
    p = torch.randn(3, 2, 5, dtype=torch.float64)
    np.save(tmp_path / "p.npy", p.numpy())
    torch.save(p, tmp_path / "p.pt")
    assert torch.equal(read_profile(tmp_path / "p.npy"), p) and torch.equal(read_profile(tmp_path / "p.pt"), p)
    (tmp_path / "empty.npy").write_bytes(b"")
    (tmp_path / "garbage.pt").write_bytes(bytes(range(256)))
    np.save(tmp_path / "objects.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    torch.save({"profile": p}, tmp_path / "dict.pt")
    cases = (
        ("p.csv", r"profile: expected a \.npy or \.pt file"),
        ("missing.npy", "profile: .*missing.npy not found"),
        ("empty.npy", "profile: .*empty.npy holds no plain numeric array"),
        ("garbage.pt", "profile: .*garbage.pt holds no plain numeric array"),
        ("objects.npy", "profile: .*objects.npy holds no plain numeric array"),
        ("dict.pt", "profile: .*dict.pt holds a dict, expected one"),
    )
    for name, match in cases:
        with pytest.raises(ValueError, match=match) as err:
            read_profile(tmp_path / name)
        assert "allow_pickle" not in str(err.value) and "weights_only" not in str(err.value)
