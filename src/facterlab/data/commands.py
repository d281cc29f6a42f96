"""``facterlab data summary|build|download`` (docs/FACTER.md §1).

- ``summary --dataset NAME [--json] [--data-dir DIR]``: users, items, ratings, positives, eligible
  rows, attribute distributions, which dataset "auto" resolves to, each file's checksum status
  against the pinned SHA-256 (a WARNING on stderr for a file that differs, an error with
  ``facterlab --strict-data``) and the encodings read.
- ``build --dataset NAME [--n-rows N] [--seed S]``: builds (or reuses) the cached interaction rows
  and prints the cache path, the split sizes and the distinct users.
- ``download --dataset NAME``: fetches the pinned files and checks their checksums.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace

from facterlab.config import BOUNDS, DATASETS, DataConfig, bound_hint, bound_problems
from facterlab.data import load_dataset, resolve_dataset
from facterlab.data.download import ensure_dataset, file_integrity
from facterlab.data.protocol import load_or_build_interactions, summarize


def register(subparsers) -> None:
    """Add the ``data`` command and its sub-commands to the ``facterlab`` parser."""
    p = subparsers.add_parser("data", help="inspect, build or download datasets")
    sub = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND")

    s = sub.add_parser("summary", help="dataset statistics and attribute distributions")
    s.add_argument("--dataset", default="auto", choices=DATASETS)
    s.add_argument("--json", action="store_true", help="print JSON")
    s.add_argument("--data-dir", default=None, help="data directory (default: $FACTERLAB_DATA)")
    s.set_defaults(func=cmd_summary)

    b = sub.add_parser("build", help="build and cache the interaction rows")
    b.add_argument("--dataset", default="auto", choices=DATASETS)
    b.add_argument(
        "--n-rows",
        type=int,
        default=None,
        help=f"rows to sample, {BOUNDS['data']['n_rows'].span()} (default: the dataset's n)",
    )
    b.add_argument("--seed", type=int, default=0, help=f"sampling seed, {bound_hint('data', 'seed')}")
    b.add_argument("--data-dir", default=None, help="data directory (default: $FACTERLAB_DATA)")
    b.add_argument("--json", action="store_true", help="print JSON")
    b.set_defaults(func=cmd_build)

    d = sub.add_parser("download", help="download a real dataset (pinned URL and checksum)")
    d.add_argument("--dataset", required=True, choices=("ml-1m", "ml-100k", "amazon"))
    d.add_argument("--data-dir", default=None, help="data directory (default: $FACTERLAB_DATA)")
    d.set_defaults(func=cmd_download)

    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def summary_dict(dataset: str = "auto", data_dir=None) -> dict:
    """What ``facterlab data summary`` prints, as a dict."""
    ds = load_dataset(dataset, data_dir)
    out = summarize(ds, DataConfig())
    out["requested"] = dataset
    out["auto_resolves_to"] = resolve_dataset("auto", data_dir)
    warnings = list(ds.info.get("warnings") or [])  # the loader's checksum warnings come first
    if not ds.is_synthetic:
        out["integrity"] = {r["file"]: r["status"] for r in file_integrity(ds.name, data_dir)}
    if ds.info.get("encodings"):
        out["encodings"] = dict(ds.info["encodings"])
    out["warnings"] = warnings
    return out


def cmd_summary(args) -> int:
    """``facterlab data summary``: users, items, ratings, eligible rows and attributes of a dataset."""
    out = summary_dict(args.dataset, args.data_dir)
    for w in out.get("warnings", []):
        print(f"WARNING: {w}", file=sys.stderr)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    tag = "  [SYNTHETIC DATA]" if out["is_synthetic"] else ""
    print(f"dataset: {out['dataset']} (requested {out['requested']}; auto -> {out['auto_resolves_to']}){tag}")
    for key in (
        "n_users",
        "n_items",
        "n_ratings",
        "n_positive_ratings",
        "eligible_rows",
        "n_users_with_eligible_rows",
        "default_n_rows",
    ):
        print(f"  {key:28s} {out[key]:>10,}")
    if out.get("integrity"):
        print("  files: " + ", ".join(f"{f} {st}" for f, st in out["integrity"].items()))
    for attr, dist in out["attribute_distribution"].items():
        print(f"  {attr}:")
        for value, count in dist.items():
            print(f"    {value:28s} {count:>8,}")
    return 0


def cmd_build(args) -> int:
    """``facterlab data build``: build (or load from the cache) the interaction rows of a dataset."""
    cfg = replace(DataConfig(), dataset=args.dataset, n_rows=args.n_rows, seed=args.seed)
    problems = bound_problems("data", cfg)  # before any file is read
    if problems:
        raise ValueError("; ".join(problems))
    inter = load_or_build_interactions(args.dataset, cfg, data_dir=args.data_dir)
    out = {
        "dataset": inter.dataset,
        "is_synthetic": inter.is_synthetic,
        "cache_path": str(inter.cache_path),
        "content_hash": inter.content_hash,
        "n_rows": int(len(inter.rows)),
        "n_calib": int(len(inter.calib)),
        "n_test": int(len(inter.test)),
        "n_distinct_users": inter.n_distinct_users,
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    tag = "  [SYNTHETIC DATA]" if out["is_synthetic"] else ""
    print(f"dataset: {out['dataset']}{tag}")
    print(f"cache: {out['cache_path']}")
    print(
        f"rows: {out['n_rows']} (calib {out['n_calib']}, test {out['n_test']}); distinct users: "
        + ", ".join(f"{k} {v}" for k, v in inter.n_distinct_users.items())
    )
    return 0


def cmd_download(args) -> int:
    """``facterlab data download``: fetch a dataset into the data directory, checked against pinned SHA-256 sums."""
    path = ensure_dataset(args.dataset, args.data_dir, download=True)
    print(f"{args.dataset}: files in {path}", file=sys.stdout)
    return 0
