"""Our statistics against R 4.2 (Debian's r-base-core) on ~1,150 committed cases.

``tests/r/cases.csv`` (from ``tests/r/make_cases.py``) holds the inputs and ``tests/r/reference.csv``
what ``tests/r/reference.R`` computed from them in R. The comparisons always run; where Rscript is
installed (CI installs it) R is run again, so the committed table is proven to be R's."""
import csv
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from bugimpact.stats.effects import benjamini_hochberg, detectable_d, hodges_lehmann, holm
from bugimpact.stats.rank_tests import mann_whitney, wilcoxon

HERE = Path(__file__).parent / "r"
# R's pt() with a noncentrality parameter is documented to lose accuracy above ncp 37.62 (AS 243);
# scipy's noncentral t and our own integral agree with each other there, and R does not.
R_NCP_LIMIT = 37.62


def _cases():
    with open(HERE / "cases.csv") as handle:
        cases = {row["id"]: row for row in csv.DictReader(handle)}
    with open(HERE / "reference.csv") as handle:
        for row in csv.DictReader(handle):
            cases[row["id"]]["r"] = [float(v) if v != "NA" else math.nan for v in row["values"].split()]
    for case in cases.values():
        case["xs"] = np.array([float(v) for v in case["x"].split()])
        case["ys"] = np.array([float(v) for v in case["y"].split()])
        case["p"] = dict(kv.split("=") for kv in case["params"].split()) if case["params"] else {}
    return cases


CASES = _cases()


def of(kind):
    return [c for c in CASES.values() if c["kind"] == kind]


def test_mann_whitney_equals_r():
    checked = 0
    for case in of("mwu"):
        ours = mann_whitney(case["xs"], case["ys"])
        r_p, r_w = case["r"]
        assert ours.statistic == r_w, case["id"]
        assert ours.p_value == pytest.approx(r_p, rel=1e-9, abs=1e-15), (case["id"], ours.method)
        checked += 1
    assert checked == 400


def test_wilcoxon_equals_r_where_the_methods_are_the_same():
    """R is exact without ties or zeros under 50 pairs, and normal with corrections otherwise; we
    are exact conditional on ties and zeros under 50 pairs (tested by enumeration in test_stats)."""
    same = differ = 0
    for case in of("wilcoxon"):
        r_p, r_v = case["r"][:2]
        d = np.round(case["xs"] - case["ys"], 12)
        nonzero = d[d != 0]
        if not len(nonzero):
            assert math.isnan(wilcoxon(case["xs"], case["ys"]).p_value)
            continue
        ours = wilcoxon(case["xs"], case["ys"])
        n = len(nonzero)
        tied = len(np.unique(np.abs(nonzero))) < n
        if n < 50 and (tied or n < len(d)):
            assert ours.method.startswith("exact conditional") or ours.method == "exact"
            differ += 1
            continue
        assert ours.statistic == min(r_v, n * (n + 1) / 2 - r_v), case["id"]
        assert ours.p_value == pytest.approx(r_p, rel=1e-9, abs=1e-15), (case["id"], ours.method)
        same += 1
    assert same >= 100 and differ >= 50, (same, differ)


def test_raw_float_differences_break_true_ties_in_r_and_not_here():
    """The cases whose raw differences R ranks as distinct although they are equal at the metrics'
    resolution: R's p on raw floats differs there, ours is the same either way."""
    broken = 0
    for case in of("wilcoxon"):
        if len(case["r"]) < 3:
            continue
        raw = case["xs"] - case["ys"]
        if len(np.unique(np.abs(raw[raw != 0]))) != len(np.unique(np.abs(np.round(raw, 12)[raw != 0]))):
            broken += case["r"][2] != case["r"][0]
    assert broken >= 20


def test_holm_and_bh_equal_r():
    for case in of("adjust"):
        k = len(case["xs"])
        assert holm(case["xs"]) == pytest.approx(case["r"][:k], rel=1e-12)
        assert benjamini_hochberg(case["xs"]) == pytest.approx(case["r"][k:], rel=1e-12)


def test_detectable_effect_equals_r_power_t_test():
    compared = 0
    for case in of("power"):
        n, alpha = int(case["p"]["n"]), float(case["p"]["alpha"])
        r_d, r_ncp = case["r"]
        ours = detectable_d(n, None if case["p"]["type"] == "paired" else n, alpha, 0.8)
        if r_ncp > R_NCP_LIMIT:
            continue
        assert ours == pytest.approx(r_d, rel=1e-7), case["params"]
        compared += 1
    assert compared >= 55


def test_hodges_lehmann_and_interval_equal_r():
    for case in of("hl_paired") + of("hl_shift"):
        paired = case["kind"] == "hl_paired"
        y = np.zeros(len(case["xs"])) if paired else case["ys"]
        estimate, low, high, level = hodges_lehmann(case["xs"], y, paired)
        assert [estimate, low, high] == pytest.approx(case["r"][:3], rel=1e-9, abs=1e-12), case["id"]
        if case["r"][3] >= 0.95:  # R says 0.95 unless the achieved alpha exceeds 1.5 x 0.05;
            assert level >= 1 - 1.5 * 0.05  # ours is the level actually achieved
        else:  # and then R rounds: 1 - signif(achieved alpha, 2)
            assert 1 - float(f"{1 - level:.2g}") == pytest.approx(case["r"][3], rel=1e-12)


@pytest.mark.skipif(not shutil.which("Rscript"), reason="R is not installed (CI installs r-base-core)")
def test_the_committed_table_is_what_r_computes(tmp_path):
    out = tmp_path / "reference.csv"
    subprocess.run(["Rscript", str(HERE / "reference.R"), str(HERE / "cases.csv"), str(out)],
                   check=True, capture_output=True)
    assert out.read_text() == (HERE / "reference.csv").read_text()


def _r_has(package):
    if not shutil.which("Rscript"):
        return False
    return subprocess.run(["Rscript", "-e", f"suppressMessages(library({package}))"],
                          capture_output=True).returncode == 0


def _rscript(code):
    """The numbers R prints (rpact prints a warning line beside them for an infinite boundary).
    The code goes in a file: R cuts a long -e expression short."""
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".R", delete=False) as handle:
        handle.write(code + "\n")
    try:
        out = subprocess.run(["Rscript", handle.name], capture_output=True, text=True, check=True)
    finally:
        Path(handle.name).unlink()
    number = re.compile(r"^-?(Inf|NaN|NA|\d+(\.\d+)?(e[-+]?\d+)?)$")
    return [float(v) if v != "NA" else math.nan for v in out.stdout.split() if number.match(v)]


@pytest.mark.skipif(not _r_has("coin"), reason="R's coin is not installed (CI installs r-cran-coin)")
def test_exact_signed_rank_on_counts_equals_coin():
    """Accuracy counts out of 450 with tied differences: from the records' counts (exact
    rationals) our p equals coin's exact conditional test on the integer counts; from the float
    metrics, broken ties give another p in many of the cases."""
    from fractions import Fraction
    rng = np.random.RandomState(30)
    cases = []
    for _ in range(40):
        n = rng.randint(8, 30)
        base = rng.randint(340, 420, n)
        cases.append((base + rng.randint(-3, 4, n), base))
    code = ["suppressMessages(library(coin))"]
    for b, c in cases:
        code.append(f"cat(sprintf('%.17g', pvalue(wilcoxsign_test(c({','.join(map(str, b))}) ~ "
                    f"c({','.join(map(str, c))}), distribution='exact', zero.method='Wilcoxon'))), "
                    "'\\n')")
    r_p = _rscript("\n".join(code))
    assert len(r_p) == len(cases)
    floats_differ = 0
    for (b, c), expected in zip(cases, r_p):
        exact = wilcoxon([Fraction(int(v), 450) for v in b], [Fraction(int(v), 450) for v in c])
        assert exact.p_value == pytest.approx(expected, rel=1e-12, abs=1e-15)
        floats_differ += wilcoxon(b / 450, c / 450).p_value != pytest.approx(expected, rel=1e-9)
    assert floats_differ >= 5  # what the counts fix


@pytest.mark.skipif(not _r_has("rpact"), reason="R's rpact is not installed (CI installs r-cran-rpact)")
def test_each_bugs_share_of_alpha_gives_rpacts_boundaries():
    """A bug's O'Brien-Fleming design at its share alpha / 10, against rpact (one-sided at half the
    share, as gsDesign's alpha / 2 per side); and a first look at 2 of 50 pairs, where rpact's own
    spending rounds to zero and gives an infinite boundary, from the second look on."""
    from bugimpact.stats.sequential import Design
    r = _rscript("suppressMessages(library(rpact)); "
                 "cat(sprintf('%.17g', c(getDesignGroupSequential(kMax=4, alpha=0.0025, sided=1, "
                 "typeOfDesign='asOF', informationRates=c(10,20,30,50)/50)$criticalValues, "
                 "getDesignGroupSequential(kMax=5, alpha=0.025, sided=1, typeOfDesign='asOF', "
                 "informationRates=c(2,10,20,30,50)/50)$criticalValues)))")
    assert Design([10, 20, 30, 50], 0.005, "obrien-fleming").bounds == pytest.approx(r[:4], abs=1e-7)
    early = Design([2, 10, 20, 30, 50], 0.05, "obrien-fleming").bounds
    assert len(r) == 9 and math.isinf(r[4]) and math.isfinite(early[0])
    assert early[1:] == pytest.approx(r[5:], abs=1e-7)


@pytest.mark.skipif(not shutil.which("Rscript"), reason="R is not installed (CI installs r-base-core)")
def test_the_mde_at_a_familys_level_equals_r():
    levels = (0.05, 0.025, 0.005, 0.001)
    r = _rscript("cat(sprintf('%.17g', c(" + ", ".join(
        f"power.t.test(n=20, sig.level={a}, power=0.8, type='paired', strict=TRUE, tol=1e-12)$delta"
        for a in levels) + ")))")
    assert [detectable_d(20, None, a, 0.8) for a in levels] == pytest.approx(r, rel=1e-9)
