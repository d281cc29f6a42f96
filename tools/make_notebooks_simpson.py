"""Generate the Simpson notebooks (10-15) from reviewable cell lists.

Run: ``python tools/make_notebooks_simpson.py`` (from the repository root).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nbgen import code, md, params, write_notebook  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
NB = ROOT / "notebooks"

SETUP = """
import time
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import display
from facterlab.reporting.figures import apply_style, save_figure, title_with_provenance
from facterlab.reporting.results import write_metrics
from facterlab.simpson import SimConfig, summarise, sweep
from facterlab.simpson import plots
apply_style()
T0 = time.time()
def title(text):
    return title_with_provenance(text, "simulation", True, "synthetic recommender", PROFILE)
"""

PROVENANCE = '"dataset": "simulation", "is_synthetic": True, "model": "synthetic recommender", "profile": PROFILE, "smoke": SMOKE'


def nb10():
    return [
        md("""
# Simpson's paradox, Fig 2: the toy example

Prost et al. (2022), Fig. 2. Exposure is the *average position* (f(p) = p, lower is better).
The paper prints only the aggregates (Orange 4.3, Blue 4.7); the list pair below (SIMPSON.md §4)
reproduces them exactly: Blue is ranked above Orange within **every** user, yet Orange has the better
average position when pairs are pooled across users."""),
        params('PROFILE = "default"\nSMOKE = False'),
        code(SETUP),
        code("""
from facterlab.simpson.toy import TOY_LISTS, draw_toy, toy_gaps
res = toy_gaps()
pd.DataFrame(res["per_user"]).T.assign(better=lambda d: np.where(d.blue < d.orange, "Blue", "Orange"))
"""),
        code("""
print(f"aggregate: Orange {res['aggregate_orange_exact']} = {res['aggregate_orange']:.3f}, "
      f"Blue {res['aggregate_blue_exact']} = {res['aggregate_blue']:.3f}; per-user reversal: {res['reversal']}")
fig = draw_toy(title=title("Fig 2: per-user vs aggregate average position"))
save_figure(fig, "simpson_fig2_toy")
plt.show()
"""),
        code(f"""
write_metrics("10_simpson_fig2_toy", {{
    {PROVENANCE},
    "aggregate_orange": res["aggregate_orange"], "aggregate_blue": res["aggregate_blue"],
    "aggregate_orange_exact": str(res["aggregate_orange_exact"]), "aggregate_blue_exact": str(res["aggregate_blue_exact"]),
    "per_user": res["per_user"], "per_user_gap": res["per_user_gap"], "aggregate_gap": res["aggregate_gap"],
    "reversal": res["reversal"], "paper": {{"aggregate_orange": 4.3, "aggregate_blue": 4.7}},
    "wall_seconds": time.time() - T0}})
"""),
    ]


def sweep_params(extra=""):
    return params(f"""
PROFILE = "default"
SMOKE = False
N_USERS = 10_000
N_SEEDS = 10
N_POINTS = 11
{extra}""".strip())


SWEEP_CODE = """
if SMOKE:
    N_USERS, N_SEEDS, N_POINTS = 1_000, 2, 4
base = SimConfig(n_users=N_USERS, bias=0.0, sigma1=0.0, d1=1.5)
grids = {"d1": np.linspace(1.5, 4.0, N_POINTS), "sigma1": np.linspace(0.0, 10.0, N_POINTS),
         "bias": np.linspace(0.0, 0.1, N_POINTS)}
raw = {p: sweep(p, v, seeds=range(N_SEEDS), base=base, ips=False) for p, v in grids.items()}
summaries = {p: summarise(df, p) for p, df in raw.items()}
"""


def nb11():
    return [
        md("""
# Simpson's paradox, Fig 3: simulation parameters drive the three factors

Prost et al. (2022), Fig. 3, on the simulation of SIMPSON.md §3 (synthetic data). Each panel varies one
knob from the base (d_1 = 1.5, sigma_1 = 0, b = 0): the density d_1 of group-1 items drives
**competition** (how many relevant items a user aligned with mu_1 has, and C(u*)), the noise level
sigma_1 drives **performance** (nDCG of that user), the model bias b drives the **per-user gap**.
Mean ± sd over seeds."""),
        sweep_params(),
        code(SETUP),
        code(SWEEP_CODE),
        code("""
cols = ["probe_n_relevant", "probe_competition", "probe_ndcg", "mean_ndcg", "per_user_gap", "share_defined"]
display(pd.concat({p: s.set_index(p)[[c + "_mean" for c in cols]] for p, s in summaries.items()}).round(4))
fig = plots.plot_factors(summaries, title=title(f"Fig 3: parameters -> factors (N={N_USERS}, {N_SEEDS} seeds)"))
save_figure(fig, "simpson_fig3_factors")
plt.show()
"""),
        code(f"""
def slope(p, col):
    s = summaries[p]
    return float(np.polyfit(s[p], s[col + "_mean"], 1)[0])
write_metrics("11_simpson_fig3_factors", {{
    {PROVENANCE}, "n_users": N_USERS, "n_seeds": N_SEEDS, "n_points": N_POINTS,
    "slopes": {{"d1_vs_probe_n_relevant": slope("d1", "probe_n_relevant"),
               "d1_vs_probe_competition": slope("d1", "probe_competition"),
               "sigma1_vs_probe_ndcg": slope("sigma1", "probe_ndcg"),
               "bias_vs_per_user_gap": slope("bias", "per_user_gap")}},
    "summaries": {{p: s.to_dict(orient="list") for p, s in summaries.items()}},
    "wall_seconds": time.time() - T0}})
"""),
    ]


def nb12():
    return [
        md("""
# Simpson's paradox, Fig 4: the aggregate gap moves with every factor

Prost et al. (2022), Fig. 4 (synthetic data): the AggregateGap against the same three knobs as Fig 3,
with the PerUserGap for reference. Competition (d_1) and performance (sigma_1) move the aggregate gap
even where the per-user gap stays near zero; the decomposition
AggregateGap = [competition/performance term] + [per-user-gap term] holds exactly in every run."""),
        sweep_params(),
        code(SETUP),
        code(SWEEP_CODE),
        code("""
fig = plots.plot_gap_sweeps(summaries, series=("aggregate_gap", "per_user_gap"),
                            title=title(f"Fig 4: AggregateGap vs PerUserGap (N={N_USERS}, {N_SEEDS} seeds)"))
save_figure(fig, "simpson_fig4_aggregate_gap")
plt.show()
allruns = pd.concat(raw.values())
decomp_err = float((allruns.competition_performance_term + allruns.per_user_gap_term - allruns.aggregate_gap).abs().max())
lemma_err = float((allruns.lemma_aggregate_gap - allruns.aggregate_gap).abs().max())
print(f"max |decomposition - aggregate| = {decomp_err:.2e}; max |lemma - aggregate| = {lemma_err:.2e}")
display(pd.concat({p: s.set_index(p)[["aggregate_gap_mean", "per_user_gap_mean", "competition_performance_term_mean",
                                       "per_user_gap_term_mean"]] * 100 for p, s in summaries.items()}).round(3))
"""),
        code(f"""
write_metrics("12_simpson_fig4_aggregate_gap", {{
    {PROVENANCE}, "n_users": N_USERS, "n_seeds": N_SEEDS, "n_points": N_POINTS,
    "max_abs_decomposition_error": decomp_err, "max_abs_lemma_error": lemma_err,
    "summaries_pp": {{p: (s.set_index(p)[["aggregate_gap_mean", "aggregate_gap_sd", "per_user_gap_mean",
                                         "per_user_gap_sd"]] * 100).reset_index().to_dict(orient="list")
                     for p, s in summaries.items()}},
    "wall_seconds": time.time() - T0}})
"""),
    ]


def nb13():
    return [
        md("""
# Simpson's paradox, Fig 5: estimating the per-user gap from a random experiment

Prost et al. (2022), Fig. 5 (synthetic data, b = 0.03): the AggregateGap, the true PerUserGap and the two
IPS estimates (counts in 10 quantile cells of U.mu_1/|mu_1|; a logistic model per group) computed from a
random experiment showing one uniformly drawn item per user. Left: against sigma_1 (d_1 = 1.5); right:
against d_1 (sigma_1 = 0). The IPS target equals the PerUserGap only when nearly every user has relevant
items of both groups: the share |U*|/N is shown below."""),
        sweep_params("BIAS = 0.03"),
        code(SETUP),
        code("""
if SMOKE:
    N_USERS, N_SEEDS, N_POINTS = 2_000, 2, 4
base = SimConfig(n_users=N_USERS, bias=BIAS)
raw = {"sigma1": sweep("sigma1", np.linspace(0, 10, N_POINTS), seeds=range(N_SEEDS), base=base.replace(d1=1.5)),
       "d1": sweep("d1", np.linspace(1.5, 4, N_POINTS), seeds=range(N_SEEDS), base=base.replace(sigma1=0.0))}
summaries = {p: summarise(df, p) for p, df in raw.items()}
"""),
        code("""
fig = plots.plot_gap_sweeps(summaries, series=("aggregate_gap", "per_user_gap", "ips_counts", "ips_model"),
                            params=("sigma1", "d1"),
                            title=title(f"Fig 5: IPS estimates vs truth (b={BIAS}, N={N_USERS}, {N_SEEDS} seeds)"))
save_figure(fig, "simpson_fig5_ips_estimate")
plt.show()
allruns = pd.concat(raw.values())
errors_pp = {c: float(100 * (allruns[c] - allruns.per_user_gap).abs().mean())
             for c in ("aggregate_gap", "naive_estimate", "ips_counts", "ips_model")}
print("mean |x - PerUserGap| (pp):", {k: round(v, 3) for k, v in errors_pp.items()})
display(pd.concat({p: s.set_index(p)[["share_defined_mean", "per_user_gap_mean", "aggregate_gap_mean",
                                       "ips_counts_mean", "ips_model_mean"]] for p, s in summaries.items()}).round(4))
"""),
        code(f"""
write_metrics("13_simpson_fig5_ips_estimate", {{
    {PROVENANCE}, "n_users": N_USERS, "n_seeds": N_SEEDS, "n_points": N_POINTS, "bias": BIAS,
    "mean_abs_error_vs_per_user_pp": errors_pp,
    "summaries": {{p: s.to_dict(orient="list") for p, s in summaries.items()}},
    "wall_seconds": time.time() - T0}})
"""),
    ]


def nb14():
    return [
        md("""
# Simpson's paradox: the 160-simulation grid

Prost et al. (2022), §5 (synthetic data): sigma_1 in linspace(0, 10, 16) x d_1 in linspace(1.5, 4, 10),
b = 0.03, one run each at N = 50,000. The paper reports mean |AggregateGap - PerUserGap| = 4.0 pp and
mean |estimate - PerUserGap| = 0.9 pp; exact values depend on the unknown N, M and r. What must hold: the
estimate's mean error is at most half the aggregate's, and the aggregate disagrees in sign with the
per-user gap in a visible share of configurations."""),
        params("""
PROFILE = "default"
SMOKE = False
N_USERS = 50_000
N_SIGMA1 = 16
N_D1 = 10
BIAS = 0.03
SEED = 0"""),
        code(SETUP),
        code("""
from facterlab.simpson import grid, grid_summary
if SMOKE:
    N_USERS, N_SIGMA1, N_D1 = 5_000, 4, 3
df = grid(np.linspace(0, 10, N_SIGMA1), np.linspace(1.5, 4, N_D1), base=SimConfig(n_users=N_USERS, bias=BIAS), seed=SEED)
summary = grid_summary(df)
table = pd.DataFrame({
    "facterlab": [summary["mean_abs_aggregate_minus_per_user_pp"], summary["mean_abs_ips_counts_minus_per_user_pp"],
                  summary["mean_abs_ips_model_minus_per_user_pp"]],
    "paper": [4.0, 0.9, 0.9],
    "sign disagreement share": [summary["sign_disagreement_aggregate"], summary["sign_disagreement_ips_counts"],
                                summary["sign_disagreement_ips_model"]]},
    index=["mean |AggregateGap - PerUserGap| (pp)", "mean |IPS counts - PerUserGap| (pp)",
           "mean |IPS model - PerUserGap| (pp)"])
display(table.round(3))
print(f"share of users in U*: mean {df.share_defined.mean():.3f}, min {df.share_defined.min():.3f}")
"""),
        code("""
fig = plots.plot_grid(df, summary, title=title(f"Grid of {len(df)} simulations (b={BIAS}, N={N_USERS})"))
save_figure(fig, "simpson_grid_160")
plt.show()
"""),
        code(f"""
write_metrics("14_simpson_grid_160", {{
    {PROVENANCE}, "n_users": N_USERS, "bias": BIAS, **summary,
    "ips_counts_error_at_most_half_of_aggregate": summary["mean_abs_ips_counts_minus_per_user_pp"]
        <= 0.5 * summary["mean_abs_aggregate_minus_per_user_pp"],
    "ips_model_error_at_most_half_of_aggregate": summary["mean_abs_ips_model_minus_per_user_pp"]
        <= 0.5 * summary["mean_abs_aggregate_minus_per_user_pp"],
    "mean_share_defined": float(df.share_defined.mean()), "min_share_defined": float(df.share_defined.min()),
    "runs": df.to_dict(orient="list"), "wall_seconds": time.time() - T0}})
"""),
    ]


def nb15():
    return [
        md("""
# Simpson's paradox explorer

Move the sliders (density d_1, noise sigma_1, model bias b, N, seed): each change reruns the simulation
(synthetic data) and shows the PerUserGap (with |U*|/N), the AggregateGap, the naive and both IPS
estimates, the decomposition and the factor read-outs. Sliders update on release
(`continuous_update=False`). The static figure below is the default configuration, so that a
non-interactive run (papermill) also stores one."""),
        params("""
PROFILE = "default"
SMOKE = False
N_USERS = 5_000
SEED = 0"""),
        code(SETUP),
        code("""
from facterlab.simpson.explorer import build_explorer, static_figure
if SMOKE:
    N_USERS = 1_000
explorer = build_explorer(n_users=N_USERS, seed=SEED)
display(explorer.widget)
"""),
        code("""
fig, res = static_figure(n_users=N_USERS, seed=SEED)
save_figure(fig, "simpson_explorer_default")
plt.show()
"""),
        code(f"""
write_metrics("15_simpson_explorer", {{
    {PROVENANCE}, "n_users": N_USERS, "seed": SEED,
    "default_readouts": {{k: v for k, v in res.items() if isinstance(v, (int, float))}},
    "wall_seconds": time.time() - T0}})
"""),
    ]


NOTEBOOKS = {
    "10_simpson_fig2_toy": nb10, "11_simpson_fig3_factors": nb11, "12_simpson_fig4_aggregate_gap": nb12,
    "13_simpson_fig5_ips_estimate": nb13, "14_simpson_grid_160": nb14, "15_simpson_explorer": nb15,
}


def main() -> None:
    for name, make in NOTEBOOKS.items():
        print(write_notebook(NB / f"{name}.ipynb", make()))


if __name__ == "__main__":
    main()
