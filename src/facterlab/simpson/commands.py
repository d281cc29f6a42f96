"""``facterlab simpson audit LOG``: the Simpson audit of your own exposure log (docs/SIMPSON.md §7).

Prints a compact table (gaps, decomposition, IPS estimates with 95% intervals, the reversal verdict) or,
with ``--json``, the result's JSON; with ``--out DIR`` writes ``simpson_audit.json``,
``simpson_audit_users.csv`` and the figure ``simpson_audit.png`` there.  A log that cannot be audited
is a one-line error (exit 1) before any work; warnings go to stderr.
"""

from __future__ import annotations

import argparse

from facterlab.simpson.auditing import DEFAULT_COLUMNS, EXPOSURE_CHOICES, FORMATS, IPS_USERS


def register(subparsers) -> None:
    """Add the ``simpson`` command and its ``audit`` sub-command to the ``facterlab`` parser."""
    p = subparsers.add_parser("simpson", help="Simpson's paradox in exposure fairness: audit your own log")
    sub = p.add_subparsers(dest="simpson_command", metavar="SUBCOMMAND")
    a = sub.add_parser(
        "audit",
        help="per-user and aggregate exposure gaps of a log, their decomposition, IPS estimates, reversal",
        description="Simpson audit of an exposure log: one row per (user, item) with the item's group, "
        "its position (or exposure) and its relevance (docs/SIMPSON.md §7).",
    )
    a.add_argument("log", metavar="LOG", help="the log: .csv, .tsv, .parquet or a RecBole .inter file")
    a.add_argument("--format", choices=FORMATS, default=None, help="the log's format (default: from the suffix)")
    for role, default in DEFAULT_COLUMNS.items():
        a.add_argument(f"--{role}-col", default=default, metavar="NAME", help=f"the {role} column (default {default})")
    a.add_argument(
        "--exposure-col",
        default=None,
        metavar="NAME",
        help="a column of exposure values (>= 0) used as they are, instead of f(position)",
    )
    a.add_argument(
        "--propensity-col",
        default=None,
        metavar="NAME",
        help="P(relevant | user, the row's group) for IPS; without --random-col the rows with a value are the experiment",
    )
    a.add_argument(
        "--random-col", default=None, metavar="NAME", help="0/1 flag of the item shown to the user at random"
    )
    a.add_argument(
        "--groups",
        default=None,
        metavar="A,B",
        help="the two group values to compare (A is group 0); rows of other groups are left out",
    )
    a.add_argument(
        "--exposure",
        choices=EXPOSURE_CHOICES,
        default="log",
        help="f(position): log = 1/log2(1 + p) (default), position = p",
    )
    a.add_argument(
        "--relevant-min", type=float, default=None, metavar="V", help="graded relevance: values >= V are relevant"
    )
    a.add_argument(
        "--ips-users",
        choices=IPS_USERS,
        default="both",
        help="both: IPS over users whose log has relevant items of both groups (estimates the PerUserGap, "
        "default); all: every user",
    )
    a.add_argument("--n-boot", type=int, default=1000, metavar="B", help="bootstrap resamples (default 1000)")
    a.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    a.add_argument(
        "--min-count",
        type=int,
        default=10,
        metavar="K",
        help="fewer users or observed rows than K: the interval or estimate is missing, with its reason (default 10)",
    )
    a.add_argument("--out", default=None, metavar="DIR", help="write the JSON, the per-user CSV and the figure here")
    a.add_argument("--no-figure", action="store_true", help="with --out: skip the figure")
    a.add_argument("--json", action="store_true", help="print the JSON instead of the table")
    a.set_defaults(func=cmd_audit)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def cmd_audit(args: argparse.Namespace) -> int:
    """``facterlab simpson audit LOG``."""
    from facterlab.simpson.auditing import audit

    groups = None
    if args.groups is not None:
        groups = [g.strip() for g in args.groups.split(",")]
        if len(groups) != 2 or not all(groups):
            raise ValueError(f"--groups needs two values separated by a comma, e.g. --groups A,B; got {args.groups!r}")
    res = audit(
        args.log,
        user_col=args.user_col,
        item_col=args.item_col,
        group_col=args.group_col,
        position_col=args.position_col,
        relevance_col=args.relevance_col,
        exposure_col=args.exposure_col,
        propensity_col=args.propensity_col,
        random_col=args.random_col,
        groups=groups,
        exposure=args.exposure,
        relevant_min=args.relevant_min,
        ips_users=args.ips_users,
        n_boot=args.n_boot,
        seed=args.seed,
        min_count=args.min_count,
        fmt=args.format,
    )
    written = res.save(args.out, figure=not args.no_figure) if args.out else []
    if args.json:
        print(res.to_json())
        return 0
    print(format_report(res))
    for p in written:
        print(f"wrote {p}")
    return 0


def format_report(res) -> str:
    """The compact text report: a header, the table (values in the result's unit) and the reversal."""
    import pandas as pd

    t = res.table()

    def num(x):
        return "" if x is None or pd.isna(x) else f"{x:+.3f}"

    lines = [
        f"Simpson audit of {res.source} ({res.format}): {res.n_rows:,} rows, {res.n_users:,} users, "
        f"{res.n_items:,} items; exposure {res.exposure}",
        f"gaps: group 0 ({res.groups[0]!r}) minus group 1 ({res.groups[1]!r}), in {res.unit}"
        + ("; a positive gap: group 0 sits lower in the lists" if res.unit == "positions" else ""),
    ]
    width = max(len(q) for q in t["quantity"])
    lines.append(f"{'quantity':<{width}}  {'value':>9}  {'95% interval':>21}  note")
    for _, r in t.iterrows():
        ci = f"[{num(r['lo'])}, {num(r['hi'])}]" if num(r["lo"]) else ""
        value = num(r["value"]) or "missing"
        lines.append(f"{r['quantity']:<{width}}  {value:>9}  {ci:>21}  {r['note']}")
    lines.append(f"reversal: {res.reversal_text()}")
    lines.append(f"intervals: {res.interval_method}")
    return "\n".join(lines)
