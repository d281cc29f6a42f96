"""``facterlab data summary|build|download|import|list`` (docs/FACTER.md §1, docs/OWN_DATA.md).

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
from pathlib import Path

from facterlab.config import BOUNDS, DATASETS, DataConfig, bound_hint, bound_problems, data_dir, dataset_arg
from facterlab.data import load_dataset, resolve_dataset
from facterlab.data.dataset import Dataset
from facterlab.data.download import ensure_dataset, file_integrity
from facterlab.data.imported import (
    IMPORT_DIR,
    DatasetError,
    from_tables,
    import_dataset,
    imported_names,
    read_recbole,
    read_table,
)
from facterlab.data.protocol import load_or_build_interactions, summarize
from facterlab.safeio import read_json


def register(subparsers) -> None:
    """Add the ``data`` command and its sub-commands to the ``facterlab`` parser."""
    p = subparsers.add_parser("data", help="inspect, build or download datasets")
    sub = p.add_subparsers(dest="data_command", metavar="SUBCOMMAND")

    s = sub.add_parser("summary", help="dataset statistics and attribute distributions")
    s.add_argument("--dataset", default="auto", type=dataset_arg, metavar="NAME")
    s.add_argument("--json", action="store_true", help="print JSON")
    s.add_argument("--data-dir", default=None, help="data directory (default: $FACTERLAB_DATA)")
    s.set_defaults(func=cmd_summary)

    b = sub.add_parser("build", help="build and cache the interaction rows")
    b.add_argument("--dataset", default="auto", type=dataset_arg, metavar="NAME")
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

    im = sub.add_parser(
        "import",
        help="import your own dataset (RecBole atomic files, or CSV/parquet tables) under a name",
        description="Validate and write a dataset into <data dir>/imported/NAME/; afterwards --dataset NAME works "
        "wherever a built-in name does (docs/OWN_DATA.md).",
    )
    im.add_argument("src", help="a folder of RecBole files (NAME.inter/.user/.item), a .inter file, or a folder "
                    "holding interactions, users and items tables (csv, tsv or parquet)")  # fmt: skip
    im.add_argument("--name", required=True, help="the dataset's name (lower-case letters, digits, '-', '_', '.')")
    im.add_argument("--format", choices=("recbole", "csv", "tsv", "parquet"), default=None,
                    help="how SRC is written (default: recbole when SRC holds a .inter file, else by the tables' suffix)")  # fmt: skip
    im.add_argument(
        "--protected", required=True, help="the protected user attributes, comma-separated, in prompt order"
    )
    im.add_argument(
        "--domain", default="item", help="what an item is, as a singular noun (job, song, book; default item)"
    )
    im.add_argument("--user-col", default="user_id")
    im.add_argument("--item-col", default="item_id")
    im.add_argument("--rating-col", default=None,
                    help="the rating column (default: 'rating' when present, else implicit feedback); 'none' forces implicit")  # fmt: skip
    im.add_argument("--timestamp-col", default=None,
                    help="the timestamp column (default: 'timestamp' when present, else the row order); 'none' forces row order")  # fmt: skip
    im.add_argument(
        "--title-col",
        default=None,
        help="the item title column (default: 'title', or RecBole's field ending in 'title')",
    )
    im.add_argument("--feature-cols", default=None,
                    help="item feature columns, comma-separated (default: RecBole's other token fields; none for tables)")  # fmt: skip
    im.add_argument("--text-col", default=None, help="item text for the encoder (default: 'title :: feature|feature')")
    im.add_argument(
        "--feature-sep",
        default=None,
        help="separator of several features in one cell (default '|', RecBole token_seq: space)",
    )
    im.add_argument(
        "--missing", default="unknown", help="the value missing protected values take, or 'drop' (default unknown)"
    )
    im.add_argument("--multi-sep", default=None, help="separator of multi-valued protected cells (default: none)")
    im.add_argument(
        "--wordings", default=None, help="a JSON file {attr: {value: other wording}} for the reword placebo"
    )
    im.add_argument(
        "--min-group", type=int, default=30, help="warn about groups with fewer users (default %(default)s)"
    )
    im.add_argument("--overwrite", action="store_true", help="replace a dataset already imported under NAME")
    im.add_argument("--data-dir", default=None, help="data directory (default: $FACTERLAB_DATA)")
    im.set_defaults(func=cmd_import)

    ls = sub.add_parser("list", help="the built-in datasets and those imported into the data directory")
    ls.add_argument("--data-dir", default=None, help="data directory (default: $FACTERLAB_DATA)")
    ls.set_defaults(func=cmd_list)

    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _opt(value: str | None, default):
    """A column flag: None -> ``default``; "none" -> None."""
    if value is None:
        return default
    return None if value.strip().lower() == "none" else value


def _tables_in(folder: Path, fmt: str | None) -> dict:
    """The interactions, users and items tables of a folder (any of csv, tsv, parquet)."""
    out = {}
    for kind in ("interactions", "users", "items"):
        found = [p for p in sorted(folder.glob(f"{kind}.*")) if p.suffix.lower() in (".csv", ".tsv", ".parquet")]
        if fmt:
            found = [p for p in found if p.suffix.lower() == f".{fmt}"]
        if not found:
            raise DatasetError(f"{folder}: no {kind}.csv, {kind}.tsv or {kind}.parquet")
        out[kind] = read_table(found[0])
    return out


def import_from_source(args) -> Dataset:
    """The :class:`~facterlab.data.Dataset` that ``facterlab data import`` builds from its arguments."""
    src = Path(args.src)
    fmt = args.format
    if fmt is None:
        fmt = "recbole" if (src.suffix == ".inter" or (src.is_dir() and any(src.glob("*.inter")))) else None
    protected = [a.strip() for a in args.protected.split(",") if a.strip()]
    wordings = None
    if args.wordings:
        wordings = read_json(Path(args.wordings), what="wordings file")
        if not isinstance(wordings, dict) or not all(isinstance(v, dict) for v in wordings.values()):
            raise DatasetError(f"{args.wordings}: expected a JSON object {{attr: {{value: other wording}}}}")
    feature_cols = None if args.feature_cols is None else [c.strip() for c in args.feature_cols.split(",") if c.strip()]
    if fmt == "recbole":
        kw = read_recbole(src, user_col=args.user_col, item_col=args.item_col, title_col=args.title_col,
                          feature_cols=feature_cols)  # fmt: skip
        kw["rating_col"] = _opt(args.rating_col, kw["rating_col"])
        kw["timestamp_col"] = _opt(args.timestamp_col, kw["timestamp_col"])
        if args.feature_sep is not None:
            kw["feature_sep"] = args.feature_sep
    else:
        if not src.is_dir():
            raise DatasetError(f"{src}: expected a folder holding interactions, users and items tables")
        t = _tables_in(src, fmt)
        cols = t["interactions"].columns
        kw = {
            "interactions": t["interactions"],
            "users": t["users"],
            "items": t["items"],
            "user_col": args.user_col,
            "item_col": args.item_col,
            "rating_col": _opt(args.rating_col, "rating" if "rating" in cols else None),
            "timestamp_col": _opt(args.timestamp_col, "timestamp" if "timestamp" in cols else None),
            "title_col": args.title_col or "title",
            "feature_cols": feature_cols or [],
            "feature_sep": "|" if args.feature_sep is None else args.feature_sep,
            "source": f"tables:{src}",
        }
    return from_tables(
        protected=protected, name=args.name, domain=args.domain, text_col=args.text_col, missing=args.missing,
        multi_sep=args.multi_sep, wordings=wordings, min_group=args.min_group, **kw,
    )  # fmt: skip


def cmd_import(args) -> int:
    """``facterlab data import``: validate, write, and print what was imported."""
    if args.name in DATASETS:
        print(
            f"facterlab data import: error: {args.name!r} is a built-in dataset name; choose another --name",
            file=sys.stderr,
        )
        return 2
    try:
        ds = import_from_source(args)
        path = import_dataset(ds, args.data_dir, overwrite=args.overwrite)
    except (ValueError, OSError) as exc:  # DatasetError, FileLimitError, a bad JSON file: one line
        print(f"facterlab data import: error: {exc}", file=sys.stderr)
        return 2
    print(f"imported {ds.name!r} into {path}")
    print(
        f"  {len(ds.users):,} users, {len(ds.items):,} {ds.domain}s, {len(ds.ratings):,} interactions; "
        f"fingerprint {ds.fingerprint()}"
    )
    for a in ds.protected:
        counts = ds.users[a].value_counts()
        shown = ", ".join(f"{v} {int(counts.get(v, 0))}" for v in ds.attribute_values[a][:8])
        more = f", ... ({len(ds.attribute_values[a])} values)" if len(ds.attribute_values[a]) > 8 else ""
        print(f"  {a}: {shown}{more}")
    for w in ds.info.get("warnings", []):
        print(f"  warning: {w}")
    print(f"use it with: facterlab run --dataset {ds.name} ...")
    return 0


def cmd_list(args) -> int:
    """``facterlab data list``."""
    print("built in: " + ", ".join(d for d in DATASETS if d != "auto"))
    names = imported_names(args.data_dir)
    print("imported: " + (", ".join(names) if names else f"none (in {data_dir(args.data_dir) / IMPORT_DIR})"))
    return 0


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
