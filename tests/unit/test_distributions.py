"""Every distribution: theoretical mean/cv, sample mean/cv within statistical bounds, validation."""
import math

import numpy as np
import pytest
from scipy import stats

from wotbench.config.distributions import DistributionError, make_distribution, validate_spec, weibull_shape_for_cv

N = 400_000

SPECS = [
    {"dist": "deterministic", "mean": 5},
    {"dist": "exponential", "mean": 5},
    {"dist": "uniform", "mean": 5, "cv": 0.5},
    {"dist": "normal", "mean": 5, "cv": 0.3},
    {"dist": "normal", "mean": 5, "cv": 0.9},      # heavily truncated: solved numerically
    {"dist": "lognormal", "mean": 5, "cv": 1.5},
    {"dist": "gamma", "mean": 5, "cv": 0.5},
    {"dist": "weibull", "mean": 5, "cv": 0.7},
    {"dist": "weibull", "mean": 5, "cv": 2.0},
    {"dist": "pareto", "mean": 5, "shape": 3.5},   # finite variance (shape > 2)
    {"dist": "pareto", "mean": 5, "cv": 0.8},
]


def expected_cv(spec):
    return {"deterministic": 0.0, "exponential": 1.0}.get(spec["dist"], spec.get("cv"))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s['dist']}-{s.get('cv', s.get('shape', ''))}")
def test_mean_and_cv(spec):
    d = make_distribution(spec)
    assert d.mean == pytest.approx(5)
    cv = expected_cv(spec)
    if spec["dist"] == "pareto" and "shape" in spec:
        a = spec["shape"]
        cv = 1 / math.sqrt(a * (a - 2))
    assert d.cv == pytest.approx(cv, rel=1e-6)
    x = d.sample(np.random.default_rng(7), N)
    assert x.shape == (N,) and (x >= 0).all()
    # sample mean within 5 standard errors (plus a floor for heavy tails with large sampling noise)
    se = d.mean * cv / math.sqrt(N)
    assert abs(x.mean() - d.mean) <= 5 * se + 1e-9 + (0.02 * d.mean if spec["dist"] == "pareto" else 0)
    if cv > 0:
        tol = 0.12 if spec["dist"] in ("pareto", "lognormal") else 0.02   # sample sd converges slowly in heavy tails
        assert x.std() / x.mean() == pytest.approx(cv, rel=tol)


@pytest.mark.parametrize("spec", [s for s in SPECS if s["dist"] != "deterministic"],
                         ids=lambda s: s["dist"])
def test_sampler_matches_cdf(spec):
    """KS test of the sampler against the distribution's own CDF (which tracegen uses)."""
    d = make_distribution(spec)
    x = d.sample(np.random.default_rng(3), 20_000)
    assert stats.kstest(x, d.cdf).pvalue > 1e-4


def test_truncated_normal_solution():
    d = make_distribution({"dist": "normal", "mean": 10, "cv": 0.95})
    m, v = d.frozen.stats(moments="mv")
    assert m == pytest.approx(10, rel=1e-9) and math.sqrt(v) / m == pytest.approx(0.95, rel=1e-6)


def test_weibull_shape_solved():
    assert weibull_shape_for_cv(1.0) == pytest.approx(1.0, rel=1e-9)    # exponential
    k = weibull_shape_for_cv(0.5)
    d = make_distribution({"dist": "weibull", "mean": 2, "cv": 0.5})
    m, v = d.frozen.stats(moments="mv")
    assert d.frozen.kwds["c"] == pytest.approx(k) and m == pytest.approx(2) and math.sqrt(v) / m == pytest.approx(0.5)


def test_seeded_sampling_is_deterministic():
    d = make_distribution({"dist": "gamma", "mean": 3, "cv": 2})
    a = d.sample(np.random.default_rng(11), 1000)
    b = d.sample(np.random.default_rng(11), 1000)
    assert np.array_equal(a, b)


def test_empirical(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("# samples in ms\n1\n2\n3\n\n6\n")
    d = make_distribution({"dist": "empirical", "file": str(f)})
    assert d.mean == 3
    x = d.sample(np.random.default_rng(1), 100_000)
    assert set(np.unique(x)) == {1, 2, 3, 6} and x.mean() == pytest.approx(3, rel=0.02)
    scaled = make_distribution({"dist": "empirical", "file": "s.txt", "mean": 6}, base_dir=tmp_path)
    assert scaled.mean == pytest.approx(6)
    assert np.allclose(d.bin_means(2), [1.5, 4.5]) and np.allclose(d.bin_means(4), [1, 2, 3, 6])


@pytest.mark.parametrize("spec,expected", [
    ({"dist": "pareto", "mean": 5, "shape": 1.0}, ("shape", "must be > 1 for pareto (finite mean), got 1")),
    ({"dist": "pareto", "mean": 5}, ("shape", "required for pareto (tail index > 1), or give cv")),
    ({"dist": "uniform", "mean": 5, "cv": 0.7}, ("cv", "must be <= 0.577 (1/sqrt(3)) for uniform, else samples would be negative, got 0.7")),
    ({"dist": "normal", "mean": 5, "cv": 1.2}, ("cv", "must be > 0 and < 1 for normal truncated at 0, got 1.2")),
    ({"dist": "gamma", "mean": 5}, ("cv", "required for gamma (coefficient of variation)")),
    ({"dist": "exponential"}, ("mean", "required for exponential")),
    ({"dist": "exponential", "mean": 0}, ("mean", "must be > 0, got 0")),
    ({"dist": "deterministic", "mean": 1, "shape": 2}, ("shape", "not used by deterministic")),
    ({"dist": "empirical"}, ("file", "required for empirical (one sample in ms per line)")),
    ({"dist": "weibull", "mean": 1, "cv": 1000}, ("cv", None)),
])
def test_validation(spec, expected):
    probs = validate_spec(spec)
    assert probs and probs[0][0] == expected[0]
    if expected[1]:
        assert probs[0][1] == expected[1]
    with pytest.raises(DistributionError):
        make_distribution(spec)


def test_empirical_bad_file(tmp_path):
    f = tmp_path / "s.txt"
    f.write_text("1\nabc\n")
    assert validate_spec({"dist": "empirical", "file": str(f)}) == \
        [("file", f"{f}:2: 'abc' is not a number, expected one sample in ms per line")]
    assert validate_spec({"dist": "empirical", "file": str(tmp_path / "no")})[0][1].startswith("file not found")
