"""Tests of whether a sample matrix z: (n, p) looks like n independent N(0, I_p) draws.

Per-coordinate tests (KS on the marginals, moments) are weak against structured dependence; the covariance-spectrum
test (top eigenvalue of the sample covariance against the Marchenko-Pastur edge (1 + sqrt(p/n))^2, computed
through the n x n Gram matrix) and a trained two-sample classifier catch low-rank or patterned structure. Every
test returns a `TestResult` with a statistic and a p-value (small = not Gaussian) where one is defined.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
from scipy import stats

from flowlab.core.validation import check_tensor

__all__ = [
    "TestResult",
    "classifier_two_sample_test",
    "covariance_spectrum_test",
    "gaussianity_report",
    "ks_marginals",
    "moment_tests",
    "norm_chi2_test",
    "sign_covariance_test",
    "third_moment_test",
]


@dataclass(frozen=True)
class TestResult:
    """name; statistic; p_value (nan where none is defined); details: extra numbers."""

    name: str
    statistic: float
    p_value: float
    details: dict[str, float] = field(default_factory=dict)


def _matrix(z: torch.Tensor) -> torch.Tensor:
    check_tensor(z, "z", min_dim=2)
    if z.dim() != 2 or z.shape[0] < 4:
        raise ValueError(f"z: expected an (n, p) sample matrix with n >= 4, got shape {tuple(z.shape)}")
    return z.detach().to(torch.float64)


def ks_marginals(z: torch.Tensor) -> TestResult:
    """Per-coordinate KS against N(0, 1) (asymptotic p-values).

    p-value: Bonferroni-corrected minimum over coordinates; details: mean p, Fisher-combined p, share below 0.05."""
    x = torch.sort(_matrix(z).T.contiguous(), dim=1).values  # (p, n), each coordinate sorted
    n = x.shape[1]
    cdf = 0.5 * torch.special.erfc(-x / math.sqrt(2))
    i = torch.arange(1, n + 1, dtype=x.dtype, device=x.device)[None, :]
    d = torch.maximum((i / n - cdf).amax(1), (cdf - (i - 1) / n).amax(1)).cpu().numpy()
    # Kolmogorov limit with Stephens' finite-n correction (|error| < 1e-3 in p for n >= 20; scipy's exact kstwo is
    # orders of magnitude slower over thousands of coordinates)
    p = np.clip(stats.kstwobign.sf(d * (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n))), 1e-300, 1.0)
    fisher = float(stats.chi2.sf(-2 * np.log(p).sum(), 2 * p.size))
    return TestResult(
        "ks_marginals",
        float(np.median(d)),
        float(min(1.0, p.min() * p.size)),
        {"mean_p": float(p.mean()), "fisher_p": fisher, "frac_p_below_0.05": float((p < 0.05).mean())},
    )


def norm_chi2_test(z: torch.Tensor, *, blocks: int | None = None) -> TestResult:
    """Squared norms of consecutive coordinate blocks of size p / blocks (default one block) against chi^2(size)."""
    x = _matrix(z)
    n, p = x.shape
    nb = 1 if blocks is None else int(blocks)
    if nb < 1 or p % nb:
        raise ValueError(f"blocks: expected a divisor of p = {p}, got {blocks!r}")
    sq = (x.reshape(n, nb, p // nb) ** 2).sum(-1).flatten().cpu().numpy()
    res = stats.kstest(sq, stats.chi2(df=p // nb).cdf)
    return TestResult("norm_chi2", float(res.statistic), float(res.pvalue), {"block_size": float(p // nb)})


def moment_tests(z: torch.Tensor) -> dict[str, TestResult]:
    """Pooled mean, variance, skewness and excess kurtosis of all entries with their N(0,1) standard errors.

    The pooled entries are treated as independent (exact under the null)."""
    x = _matrix(z).flatten()
    m = x.numel()
    out = {}
    for name, val, se in (
        ("mean", x.mean(), 1 / math.sqrt(m)),
        ("variance", x.var() - 1, math.sqrt(2 / m)),
        ("skewness", (x**3).mean(), math.sqrt(15 / m)),
        ("excess_kurtosis", (x**4).mean() - 3, math.sqrt(96 / m)),
    ):
        zs = float(val) / se
        out[name] = TestResult(name, float(val), float(2 * stats.norm.sf(abs(zs))), {"z_score": zs})
    return out


def third_moment_test(z: torch.Tensor, *, n_triples: int = 10_000, generator: torch.Generator) -> TestResult:
    """E[z_i z_j z_k] over random distinct triples: sum of squared z-scores sqrt(n) * mean vs chi^2(n_triples)."""
    x = _matrix(z)
    n, p = x.shape
    if p < 3:
        raise ValueError("z: needs at least 3 coordinates for the third-moment test")
    idx = torch.stack([torch.randperm(p, generator=generator)[:3] for _ in range(min(n_triples, 200))])
    if n_triples > 200:
        idx = torch.randint(0, p, (n_triples, 3), generator=generator)
        idx = idx[(idx[:, 0] != idx[:, 1]) & (idx[:, 0] != idx[:, 2]) & (idx[:, 1] != idx[:, 2])]
    prod = x[:, idx[:, 0]] * x[:, idx[:, 1]] * x[:, idx[:, 2]]
    zs = math.sqrt(n) * prod.mean(0) / prod.std(0).clamp_min(1e-12)
    stat = float((zs**2).sum())
    return TestResult(
        "third_moment", stat, float(stats.chi2.sf(stat, zs.numel())), {"max_abs_z": float(zs.abs().max())}
    )


def _top_eig(x: torch.Tensor) -> float:
    n = x.shape[0]
    xf = x.to(torch.float32)
    gram = (xf @ xf.T).to(torch.float64) / n  # float32 products: relative error ~1e-6, far below the test's scale
    return float(torch.linalg.eigvalsh(gram)[-1])


def covariance_spectrum_test(
    z: torch.Tensor, *, n_null: int = 0, generator: torch.Generator | None = None, center: bool = False
) -> TestResult:
    """Top eigenvalue of the sample covariance z^T z / n (via the n x n Gram z z^T / n) vs the Marchenko-Pastur
    edge (1 + sqrt(p/n))^2. With n_null > 0 it is also compared with `n_null` Gaussian samples of the same (n, p)
    (p-value (1 + #null >= obs) / (1 + n_null)); otherwise the p-value is nan and `ratio` = top / edge is the
    statistic to read (about 1 for N(0, I); the fluctuations are O(n^{-2/3}))."""
    x = _matrix(z)
    if center:
        x = x - x.mean(0)
    n, p = x.shape
    top = _top_eig(x)
    edge = (1 + math.sqrt(p / n)) ** 2
    details = {"top_eigenvalue": top, "mp_edge": edge}
    pval = float("nan")
    if n_null > 0:
        if generator is None:
            raise ValueError("generator: needed for the simulated null (n_null > 0)")
        null = [_top_eig(torch.randn(n, p, generator=generator, dtype=torch.float64)) for _ in range(n_null)]
        details["null_mean"] = float(np.mean(null))
        details["null_max"] = float(np.max(null))
        pval = (1 + sum(v >= top for v in null)) / (1 + n_null)
    return TestResult("covariance_spectrum", top / edge, pval, details)


def sign_covariance_test(z: torch.Tensor, **kw) -> TestResult:
    """`covariance_spectrum_test` on sign(z) (catches structured sign patterns; sign(N(0,1)) has unit variance)."""
    res = covariance_spectrum_test(torch.sign(_matrix(z)), **kw)
    return TestResult("sign_covariance", res.statistic, res.p_value, res.details)


def classifier_two_sample_test(
    z: torch.Tensor,
    *,
    reference: torch.Tensor | None = None,
    model: str = "logreg",
    generator: torch.Generator,
    test_fraction: float = 0.3,
) -> TestResult:
    """Held-out accuracy of a classifier telling z from `reference` (default fresh N(0, I) of the same shape).

    model: "logreg" (L2 logistic regression) or "mlp2" (two hidden layers). p-value: two-sided binomial test of
    the held-out accuracy against 1/2 (an accuracy far below 1/2 also shows a difference: an over-fitted classifier
    on a structured sample can be reliably wrong). details: acc_ci_low/high (Wilson 95%).
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    x = _matrix(z)
    ref = torch.randn(x.shape, generator=generator, dtype=torch.float64) if reference is None else _matrix(reference)
    if ref.shape[1] != x.shape[1]:
        raise ValueError("reference: expected the same number of coordinates as z")
    data = torch.cat([x, ref.to(x.device)]).cpu().numpy()
    labels = np.r_[np.ones(len(x)), np.zeros(len(ref))]
    perm = torch.randperm(len(data), generator=generator).numpy()
    n_test = max(2, int(test_fraction * len(data)))
    te, tr = perm[:n_test], perm[n_test:]
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
    if model == "logreg":
        clf = LogisticRegression(C=1.0, max_iter=300)
    elif model == "mlp2":
        clf = MLPClassifier(hidden_layer_sizes=(256, 256), max_iter=200, early_stopping=True, random_state=seed)
    else:
        raise ValueError(f"model: expected 'logreg' or 'mlp2', got {model!r}")
    clf.fit(data[tr], labels[tr])
    correct = int((clf.predict(data[te]) == labels[te]).sum())
    acc = correct / n_test
    w = 1.96
    centre = (acc + w**2 / (2 * n_test)) / (1 + w**2 / n_test)
    half = w * math.sqrt(acc * (1 - acc) / n_test + w**2 / (4 * n_test**2)) / (1 + w**2 / n_test)
    return TestResult(
        f"classifier_{model}",
        acc,
        float(stats.binomtest(correct, n_test, 0.5).pvalue),
        {"n_test": float(n_test), "acc_ci_low": centre - half, "acc_ci_high": centre + half},
    )


def gaussianity_report(
    z: torch.Tensor,
    *,
    generator: torch.Generator,
    blocks: int | None = None,
    classifier: str | None = "logreg",
    n_null: int = 0,
) -> dict[str, float]:
    """All tests on z: (n, p) as a flat dict of numbers (statistics and p-values) for benchmark tables."""
    out: dict[str, float] = {}
    ks = ks_marginals(z)
    out["ks_min_p_bonf"], out["ks_mean_p"] = ks.p_value, ks.details["mean_p"]
    out["norm_chi2_p"] = norm_chi2_test(z, blocks=blocks).p_value
    for name, res in moment_tests(z).items():
        out[f"{name}_z"] = res.details["z_score"]
    tm = third_moment_test(z, generator=generator)
    out["third_moment_p"], out["third_moment_max_z"] = tm.p_value, tm.details["max_abs_z"]
    cov = covariance_spectrum_test(z, n_null=n_null, generator=generator)
    out["top_eig"], out["mp_edge"], out["top_eig_over_edge"] = (
        cov.details["top_eigenvalue"],
        cov.details["mp_edge"],
        cov.statistic,
    )
    sc = sign_covariance_test(z)
    out["sign_top_eig_over_edge"] = sc.statistic
    if classifier is not None:
        cl = classifier_two_sample_test(z, model=classifier, generator=generator)
        out["classifier_acc"], out["classifier_p"] = cl.statistic, cl.p_value
    return out
