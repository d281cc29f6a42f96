"""Interactive explorer of the Simpson simulation (Prost et al. 2022, §5): sliders for the density
d_1, the noise level sigma_1, the model bias b, N and the seed; shows the PerUserGap (with
``|U*|/N``), the AggregateGap, the naive and both IPS estimates, the factor read-outs and a bar plot.

All logic lives here; ``notebooks/15_simpson_explorer.ipynb`` only calls :func:`build_explorer`.
ipywidgets and matplotlib are imported inside the functions.  Stable hooks for browser tests:
slider classes ``simpson-slider-d1``, ``simpson-slider-sigma1``, ``simpson-slider-bias``,
``simpson-slider-n``, ``simpson-slider-seed``; the numbers output has class ``simpson-numbers``
(with element ids ``simpson-per-user-gap``, ``simpson-aggregate-gap``, ...), the figure
``simpson-figure`` (an ``<img>``), the status line ``simpson-status``.
"""

from __future__ import annotations

import html
import io

from facterlab.simpson import ips as ips_mod
from facterlab.simpson.plots import GAP_SERIES
from facterlab.simpson.simulate import DEFAULT_CONFIG, SimpsonConfig, measure, random_experiment, simulate
from facterlab.style import add_caption, title_with_provenance

TEXT_FORM = (
    "Simpson's paradox explorer: interactive sliders (run this notebook in Jupyter to use them); "
    "the static figures and numbers below show the setting it opens on (a sign reversal at seed 0) "
    "and the default setting."
)
#: the default N: at b = 0.03, d_1 = 1.5, sigma_1 = 0 the model IPS lands further from the PerUserGap than
#: the AggregateGap in 15 of 21 seeds at N = 5,000, 12 at 10,000, 6 at 20,000, 2 at 50,000 (docs/SIMPSON.md §6)
DEFAULT_N = 20_000
DEFAULTS = {"d1": 1.5, "sigma1": 0.0, "bias": 0.03, "n_users": DEFAULT_N, "seed": 0}
#: the setting the explorer opens on: the paradox itself at seed 0 (a PerUserGap of -0.37 pp against an
#: AggregateGap of +0.49 pp; ``tests/simpson/test_simpson_explorer.py`` checks the signs). The reversal is
#: small and seed-dependent: at seeds 1, 2 and 4 the two gaps agree in sign (issue 42, 2026-12-07).
#: The default setting (:data:`DEFAULTS`, no reversal) is one button away.
OPENING = {"d1": 3.0, "sigma1": 5.0, "bias": 0.01, "n_users": DEFAULT_N, "seed": 0}
#: re-drawn random experiments behind the IPS interval (the logistic model refitted on each)
N_DRAWS = 6
#: what the two item groups are (gaps are group 0 minus group 1)
GROUP_NAMES = {
    0: "group 0: reference items (density d_0 = 1.5, no extra noise, no bias)",
    1: "group 1: varied items (density d_1, noise sigma_1, model bias +b)",
}
NUMBER_ROWS = (
    ("per_user_gap", "PerUserGap (truth, pp)", True),
    ("aggregate_gap", "AggregateGap (pp)", True),
    ("naive_estimate", "naive estimate (pp)", True),
    ("ips_counts", "IPS estimate, counts (pp)", True),
    ("ips_model", "IPS estimate, logistic model (pp)", True),
    ("ips_model_half_width", "  its 95% interval half-width (pp)", True),
    ("ips_oracle", "IPS estimate, oracle weights 1/n_s(u) (pp)", True),
    ("ips_estimand", "IPS estimand, true weights (pp)", True),
    ("competition_performance_term", "decomposition: competition/performance term (pp)", True),
    ("per_user_gap_term", "decomposition: per-user-gap term (pp)", True),
    ("share_defined", "share of users in U* (|U*|/N)", False),
    ("probe_n_relevant", "competition: relevant items n(u*)", False),
    ("probe_competition", "competition C(u*)", False),
    ("probe_ndcg", "performance nDCG(u*)", False),
)


def ips_spread(sim, n_draws: int = N_DRAWS) -> dict:
    """How much the model IPS estimate moves between random experiments on the same simulated world:
    the logistic-model estimate on ``n_draws`` freshly drawn experiments (one shown item per user), their
    sample sd, and a 95% half-width ``1.96 sd`` (the estimate's sampling uncertainty at this N)."""
    import numpy as np

    vals = np.array([ips_mod.ips_estimate(random_experiment(sim, seed=k), "model").value for k in range(n_draws)])
    vals = vals[np.isfinite(vals)]
    sd = float(vals.std(ddof=1)) if len(vals) >= 2 else float("nan")
    return {"ips_model_sd": sd, "ips_model_half_width": 1.96 * sd, "ips_model_draws": int(len(vals))}


def sign_reversal(res: dict) -> str | None:
    """The paradox itself, in words, when the AggregateGap and the PerUserGap have opposite signs (each
    favours another group); None when they agree or one is zero or missing.

    Parameters
    ----------
    res : dict
        Read-outs with ``per_user_gap`` and ``aggregate_gap`` (:func:`explorer_numbers`).

    Returns
    -------
    str or None
        ``"SIGN REVERSAL (Simpson's paradox): ..."`` naming the group each gap favours, or None.

    Examples
    --------
    >>> sign_reversal({"per_user_gap": -0.0037, "aggregate_gap": 0.0049})[:42]
    "SIGN REVERSAL (Simpson's paradox): pooled "
    >>> sign_reversal({"per_user_gap": -0.02, "aggregate_gap": -0.01}) is None
    True
    """
    pug, agg = res.get("per_user_gap"), res.get("aggregate_gap")
    if pug is None or agg is None or pug != pug or agg != agg or pug == 0 or agg == 0 or (pug > 0) == (agg > 0):
        return None

    def fav(x):  # exposure gap group 0 - group 1 > 0: group 0 gets more exposure
        return "group 0" if x > 0 else "group 1"

    return (
        f"SIGN REVERSAL (Simpson's paradox): pooled over users the AggregateGap favours {fav(agg)} "
        f"({100 * agg:+.2f} pp), within users the PerUserGap favours {fav(pug)} ({100 * pug:+.2f} pp)"
    )


def explorer_numbers(
    d1: float = 1.5,
    sigma1: float = 0.0,
    bias: float = 0.03,
    n_users: int = DEFAULT_N,
    seed: int = 0,
    base: SimpsonConfig = DEFAULT_CONFIG,
    n_draws: int = N_DRAWS,
) -> dict:
    """Run one simulation with these knobs and return its read-outs (raw units), with the model IPS's
    spread over ``n_draws`` re-drawn random experiments (:func:`ips_spread`; 0: not computed).

    >>> r = explorer_numbers(n_users=500, n_draws=3)
    >>> sorted(k for k in r if k.startswith("ips_model"))
    ['ips_model', 'ips_model_draws', 'ips_model_half_width', 'ips_model_sd']
    """
    cfg = base.replace(d1=float(d1), sigma1=float(sigma1), bias=float(bias), n_users=int(n_users), seed=int(seed))
    sim = simulate(cfg)
    res = {
        k: getattr(cfg, k)
        for k in ("n_users", "n_items", "rank", "d0", "d1", "sigma", "sigma1", "bias", "seed", "noise", "mu1")
    }
    res.update(measure(sim))
    if n_draws:
        res.update(ips_spread(sim, n_draws))
    return res


def numbers_html(res: dict, ids: bool = True) -> str:
    """An HTML table of the read-outs; each value sits in an element with id ``simpson-<key>``
    (``ids=False``: no ids, for a static copy beside the live widget).  A sign reversal is flagged
    above the table (id ``simpson-reversal``), and the groups are named below it."""
    rows = []
    for key, label, pp in NUMBER_ROWS:
        v = res.get(key)
        if key == "ips_model_half_width" and v is not None and v == v:
            txt = f"±{100 * v:.3f}"
            label = f"  its 95% interval half-width (pp; 1.96 sd over {res.get('ips_model_draws')} random experiments)"
        else:
            txt = (
                "n/a"
                if v is None or v != v
                else (f"{100 * v:+.3f}" if pp else (f"{v:.3f}" if isinstance(v, float) else str(v)))
            )
        rows.append(
            f"<tr><td>{html.escape(label)}</td>"
            + (f"<td id='simpson-{key.replace('_', '-')}'" if ids else "<td")
            + f" style='text-align:right'>{txt}</td></tr>"
        )
    cfg = (
        f"d_1={res['d1']:.2f}, sigma_1={res['sigma1']:.2f}, b={res['bias']:.3f}, N={res['n_users']}, seed={res['seed']}"
    )
    if "noise" in res:
        cfg += f" (noise={res['noise']}, mu1={res['mu1']})"
    rev = sign_reversal(res)
    flag = (
        f"<div{' id=' + chr(39) + 'simpson-reversal' + chr(39) if ids else ''} style='color:#b00020;font-weight:bold'>"
        f"{html.escape(rev)}</div>"
        if rev
        else ""
    )
    groups = "<br>".join(html.escape(g) for g in GROUP_NAMES.values())
    return (
        f"<div class='simpson-numbers-inner'><b>{html.escape(cfg)}</b> [SYNTHETIC DATA]{flag}"
        f"<table>{''.join(rows)}</table><small>gaps = exposure of group 0 minus group 1:<br>{groups}</small></div>"
    )


def explorer_figure(res: dict, pyplot: bool = False):
    """Bar plot of the gaps and estimates (pp) for one simulation: the groups named on the axis, the
    model IPS with its 95% interval over re-drawn random experiments, a sign reversal flagged in red.

    ``pyplot=False`` builds a bare ``matplotlib.figure.Figure`` (no display side effects, for the
    widget); ``pyplot=True`` uses ``plt.subplots`` (for the notebook's static figure).
    """
    import textwrap

    if pyplot:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7.4, 4.2))
    else:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(7.4, 4.2))
        ax = fig.add_subplot()
    keys = ["per_user_gap", "aggregate_gap", "naive_estimate", "ips_model", "ips_counts", "ips_oracle"]
    vals = [100 * res[k] for k in keys]
    half = res.get("ips_model_half_width")
    err = [[0.0] * len(keys), [0.0] * len(keys)]
    if half is not None and half == half:
        i = keys.index("ips_model")
        err[0][i] = err[1][i] = 100 * half
    ax.barh(range(len(keys)), vals, color=[GAP_SERIES[k][1] for k in keys])
    if half is not None and half == half:
        i = keys.index("ips_model")
        ax.errorbar(vals[i], i, xerr=100 * half, fmt="none", ecolor="black", capsize=4, gid="simpson-ips-interval")
    ax.set_yticks(range(len(keys)), [GAP_SERIES[k][0] for k in keys])
    ax.invert_yaxis()
    ax.axvline(0, color="black", lw=0.8)
    for i, v in enumerate(vals):
        end = v + (err[1][i] if v >= 0 else -err[0][i])  # past the error bar
        ax.text(
            end, i, f" {v:+.2f} " if v >= 0 else f"{v:+.2f} ", va="center", ha="left" if v >= 0 else "right", fontsize=8
        )
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo - 0.15 * (hi - lo), hi + 0.15 * (hi - lo))  # room for the value labels
    ax.set_xlabel("exposure gap, group 0 (reference items) minus group 1 (varied items), pp", fontsize=8)
    head = title_with_provenance(
        f"Simpson explorer: d_1 = {res['d1']:.2f}, sigma_1 = {res['sigma1']:.1f}, b = {res['bias']:.3f}, "
        f"N = {res['n_users']:,}, seed {res['seed']}",
        "simulation",
        True,
    )
    rev = sign_reversal(res)
    # centred on the figure, not on the axes (long tick labels push the axes right, and an axes title then
    # runs past the figure's edge), wrapped to its width
    fig.suptitle("\n".join(textwrap.wrap(head, 78)), fontsize=8)
    fig.tight_layout()
    if rev:  # above the title, centred on the figure (saved with bbox_inches="tight")
        fig.text(
            0.5,
            1.0,
            "\n".join(textwrap.wrap(rev, 95)),
            ha="center",
            va="bottom",
            fontsize=8,
            color="#b00020",
            fontweight="bold",
            gid="simpson-reversal",
        )
    interval = (
        f"IPS (logistic model) bar: 95% interval, 1.96 sd over {res.get('ips_model_draws')} re-drawn random "
        "experiments on this world (the estimate's sampling uncertainty at this N); other values single draws"
        if half is not None and half == half
        else "single values, no interval"
    )
    add_caption(
        fig,
        f"n = {res['n_users']:,} simulated users, one simulation (seed {res['seed']}); {interval}. "
        f"Estimates use one random shown item per user. {GROUP_NAMES[0]}; {GROUP_NAMES[1]}.",
    )
    return fig


def figure_png(fig) -> bytes:
    """PNG bytes of a figure."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")  # the reversal flag and caption sit outside the axes
    return buf.getvalue()


class Explorer:
    """The widget and its update callback.  ``widget`` is the box to display; ``update()``
    recomputes the numbers and redraws; ``last`` holds the last read-outs."""

    def __init__(
        self,
        d1: float = OPENING["d1"],
        sigma1: float = OPENING["sigma1"],
        bias: float = OPENING["bias"],
        n_users: int = int(OPENING["n_users"]),
        seed: int = int(OPENING["seed"]),
        base: SimpsonConfig | None = None,
    ):
        import ipywidgets as w

        self.base = base or SimpsonConfig()
        common = {
            "continuous_update": False,
            "style": {"description_width": "120px"},
            "layout": w.Layout(width="480px"),
        }
        self.sliders = {
            "d1": w.FloatSlider(value=d1, min=1.5, max=4.0, step=0.25, description="density d_1", **common),
            "sigma1": w.FloatSlider(value=sigma1, min=0.0, max=10.0, step=0.5, description="noise sigma_1", **common),
            "bias": w.FloatSlider(
                value=bias, min=0.0, max=0.1, step=0.005, readout_format=".3f", description="model bias b", **common
            ),
            "n_users": w.IntSlider(value=n_users, min=1_000, max=50_000, step=1_000, description="N users", **common),
            "seed": w.IntSlider(value=seed, min=0, max=20, step=1, description="seed", **common),
        }
        for key, sl in self.sliders.items():
            sl.add_class(f"simpson-slider-{'n' if key == 'n_users' else key}")
            sl.observe(self._on_change, names="value")
        self.numbers = w.HTML(value="")
        self.numbers.add_class("simpson-numbers")
        self.image = w.Image(format="png", layout=w.Layout(width="630px"))
        self.image.add_class("simpson-figure")
        self.status = w.Label(value="")
        self.status.add_class("simpson-status")
        self._holding = False
        self.buttons = {}
        for key, label, values in (
            ("opening", "reversal setting (opens here)", OPENING),
            ("default", "default setting", DEFAULTS),
        ):
            b = w.Button(description=label, layout=w.Layout(width="230px"))
            b.add_class(f"simpson-button-{key}")
            b.on_click(lambda _b, values=values: self.set_values(values))
            self.buttons[key] = b
        self.n_updates = 0
        self.last: dict = {}
        row = w.HBox([self.numbers, self.image], layout=w.Layout(align_items="flex-start"))
        self.widget = w.VBox(
            [
                w.HTML(
                    "<b>Simpson's paradox explorer</b> (synthetic simulation; gaps = exposure of group 0, "
                    "reference items, minus group 1, items with density d_1, noise sigma_1 and model bias b)"
                ),
                w.HBox(list(self.buttons.values())),
                *self.sliders.values(),
                self.status,
                row,
            ]
        )
        self.widget.add_class("simpson-explorer")
        self.update()

    def values(self) -> dict:
        """The sliders' current values, by parameter name."""
        return {k: s.value for k, s in self.sliders.items()}

    def _repr_mimebundle_(self, **kwargs) -> dict:
        """``display(explorer)``: the widget in a live notebook; where widgets do not render (a saved
        notebook on GitHub, a terminal) a sentence instead of ipywidgets' raw ``VBox(children=...)``."""
        bundle = dict(self.widget._repr_mimebundle_(**kwargs))
        bundle["text/plain"] = TEXT_FORM
        return bundle

    def _on_change(self, change) -> None:
        if not self._holding:
            self.update()

    def set_values(self, values: dict) -> dict:
        """Move every slider to ``values`` (e.g. :data:`DEFAULTS`), then recompute once."""
        self._holding = True
        try:
            for key, sl in self.sliders.items():
                if key in values:
                    sl.value = values[key]
        finally:
            self._holding = False
        return self.update()

    def update(self) -> dict:
        """Recompute all numbers for the current slider values and redraw the figure."""
        self.status.value = "computing..."
        res = explorer_numbers(base=self.base, **self.values())
        fig = explorer_figure(res)
        self.image.value = figure_png(fig)
        self.numbers.value = numbers_html(res)
        self.n_updates += 1
        self.last = res
        self.status.value = f"updated ({self.n_updates})"
        return res


def build_explorer(**kw) -> Explorer:
    """Build the explorer (see :class:`Explorer`); display ``.widget`` in a notebook."""
    return Explorer(**kw)


def static_figure(setting: dict | None = None, **kw):
    """A setting's figure via pyplot (so a papermill run stores one), and its read-outs: ``setting``
    (default :data:`DEFAULTS`; :data:`OPENING` for the one the explorer opens on) updated by ``kw``."""
    params = {**(DEFAULTS if setting is None else setting), **kw}
    res = explorer_numbers(**params)
    return explorer_figure(res, pyplot=True), res
