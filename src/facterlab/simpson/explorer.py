"""Interactive explorer of the Simpson simulation (Prost et al. 2022, §5): sliders for the density
d_1, the noise level sigma_1, the model bias b, N and the seed; shows the PerUserGap (with
|U*|/N), the AggregateGap, the naive and both IPS estimates, the factor read-outs and a bar plot.

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

from facterlab.simpson.plots import GAP_SERIES
from facterlab.simpson.simulate import DEFAULT_CONFIG, SimpsonConfig, simulate_and_measure
from facterlab.style import add_caption, title_with_provenance

TEXT_FORM = (
    "Simpson's paradox explorer: interactive sliders (run this notebook in Jupyter to use them); "
    "the static figure and numbers below show the default setting."
)
DEFAULTS = {"d1": 1.5, "sigma1": 0.0, "bias": 0.03, "n_users": 5_000, "seed": 0}
NUMBER_ROWS = (
    ("per_user_gap", "PerUserGap (truth, pp)", True),
    ("aggregate_gap", "AggregateGap (pp)", True),
    ("naive_estimate", "naive estimate (pp)", True),
    ("ips_counts", "IPS estimate, counts (pp)", True),
    ("ips_model", "IPS estimate, logistic model (pp)", True),
    ("ips_oracle", "IPS estimate, oracle weights 1/n_s(u) (pp)", True),
    ("ips_estimand", "IPS estimand, true weights (pp)", True),
    ("competition_performance_term", "decomposition: competition/performance term (pp)", True),
    ("per_user_gap_term", "decomposition: per-user-gap term (pp)", True),
    ("share_defined", "share of users in U* (|U*|/N)", False),
    ("probe_n_relevant", "competition: relevant items n(u*)", False),
    ("probe_competition", "competition C(u*)", False),
    ("probe_ndcg", "performance nDCG(u*)", False),
)


def explorer_numbers(
    d1: float = 1.5,
    sigma1: float = 0.0,
    bias: float = 0.03,
    n_users: int = 5_000,
    seed: int = 0,
    base: SimpsonConfig = DEFAULT_CONFIG,
) -> dict:
    """Run one simulation with these knobs and return its read-outs (raw units).

    >>> r = explorer_numbers(n_users=500)
    >>> sorted(k for k in r if k.startswith("ips_"))
    ['ips_counts', 'ips_estimand', 'ips_model', 'ips_oracle', 'ips_oracle_both']
    """
    return simulate_and_measure(
        base.replace(d1=float(d1), sigma1=float(sigma1), bias=float(bias), n_users=int(n_users), seed=int(seed))
    )


def numbers_html(res: dict, ids: bool = True) -> str:
    """An HTML table of the read-outs; each value sits in an element with id ``simpson-<key>``
    (``ids=False``: no ids, for a static copy beside the live widget)."""
    rows = []
    for key, label, pp in NUMBER_ROWS:
        v = res.get(key)
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
    return (
        f"<div class='simpson-numbers-inner'><b>{html.escape(cfg)}</b> [SYNTHETIC DATA]"
        f"<table>{''.join(rows)}</table></div>"
    )


def explorer_figure(res: dict, pyplot: bool = False):
    """Bar plot of the gaps and estimates (pp) for one simulation.

    ``pyplot=False`` builds a bare ``matplotlib.figure.Figure`` (no display side effects, for the
    widget); ``pyplot=True`` uses ``plt.subplots`` (for the notebook's static figure).
    """
    if pyplot:
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(7, 3.6))
    else:
        from matplotlib.figure import Figure

        fig = Figure(figsize=(7, 3.6))
        ax = fig.add_subplot()
    keys = ["per_user_gap", "aggregate_gap", "naive_estimate", "ips_model", "ips_counts", "ips_oracle"]
    vals = [100 * res[k] for k in keys]
    ax.barh(range(len(keys)), vals, color=[GAP_SERIES[k][1] for k in keys])
    ax.set_yticks(range(len(keys)), [GAP_SERIES[k][0] for k in keys])
    ax.invert_yaxis()
    ax.axvline(0, color="black", lw=0.8)
    for i, v in enumerate(vals):
        ax.text(v, i, f" {v:+.2f}", va="center", ha="left" if v >= 0 else "right", fontsize=8)
    ax.set_xlabel("gap, group 0 - group 1 (pp)")
    ax.set_title(
        title_with_provenance(
            f"d1={res['d1']:.2f} sigma1={res['sigma1']:.1f} b={res['bias']:.3f} N={res['n_users']} seed={res['seed']}",
            "simulation",
            True,
        ),
        fontsize=8,
    )
    fig.tight_layout()
    add_caption(
        fig,
        f"n = {res['n_users']:,} simulated users, one simulation (seed {res['seed']}): single values, no interval; "
        "estimates use one random shown item per user.",
    )
    return fig


def figure_png(fig) -> bytes:
    """PNG bytes of a figure."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    return buf.getvalue()


class Explorer:
    """The widget and its update callback.  ``widget`` is the box to display; ``update()``
    recomputes the numbers and redraws; ``last`` holds the last read-outs."""

    def __init__(
        self,
        d1: float = DEFAULTS["d1"],
        sigma1: float = DEFAULTS["sigma1"],
        bias: float = DEFAULTS["bias"],
        n_users: int = int(DEFAULTS["n_users"]),
        seed: int = int(DEFAULTS["seed"]),
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
        self.n_updates = 0
        self.last: dict = {}
        row = w.HBox([self.numbers, self.image], layout=w.Layout(align_items="flex-start"))
        self.widget = w.VBox(
            [
                w.HTML("<b>Simpson's paradox explorer</b> (synthetic simulation)"),
                *self.sliders.values(),
                self.status,
                row,
            ]
        )
        self.widget.add_class("simpson-explorer")
        self.update()

    def values(self) -> dict:
        return {k: s.value for k, s in self.sliders.items()}

    def _repr_mimebundle_(self, **kwargs) -> dict:
        """``display(explorer)``: the widget in a live notebook; where widgets do not render (a saved
        notebook on GitHub, a terminal) a sentence instead of ipywidgets' raw ``VBox(children=...)``."""
        bundle = dict(self.widget._repr_mimebundle_(**kwargs))
        bundle["text/plain"] = TEXT_FORM
        return bundle

    def _on_change(self, change) -> None:
        self.update()

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


def static_figure(**kw):
    """The default configuration's figure via pyplot (so a papermill run stores one), and its read-outs."""
    params = {**DEFAULTS, **kw}
    res = explorer_numbers(**params)
    return explorer_figure(res, pyplot=True), res
