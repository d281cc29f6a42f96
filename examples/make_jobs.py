"""Write the "jobs" example of docs/OWN_DATA.md and notebook 21: a small job-board dataset outside movies,
as RecBole atomic files, with a wording map and an exposure log.

    python examples/make_jobs.py            # writes examples/jobs/ (the committed files)
    python examples/make_jobs.py OUT_DIR    # writes them elsewhere

Everything is drawn from one seeded generator, so the files are the same on every machine (a test checks
that the committed files equal what this script writes).

- ``jobs.item``: 240 job ads in 6 sectors (``sector:token``), titles "<role> at <company>".
- ``jobs.user``: 300 job seekers with a ``country`` (BR, DE, IN, NG, US) and a ``language`` (de, en, hi, pt),
  correlated with the country; 10% of the languages are missing (an empty cell).
- ``jobs.inter``: 20 applications per seeker (implicit feedback: no rating field), mostly in the seeker's
  own sector, with timestamps.
- ``wordings.json``: the same values in other words ("BR" -> "Brazil", "pt" -> "Portuguese"), for the twin
  monitor's reword placebo.
- ``bias_table.json``: a bias table for the simulated recommender, written for this dataset's attributes
  and features (docs/OWN_DATA.md, section 3).
- ``exposure_log.csv``: what a job board showed each seeker (the top 10 of a ranking, plus one ad drawn
  uniformly at random and logged at its rank, flagged ``random``), with the item group (``office``: tech, finance, education;
  ``field``: the others) and whether the ad is in the seeker's own sector (``relevance``): the input of
  ``facterlab simpson audit``.

No bias is planted in the data itself: the biased recommender of notebook 21 is a function written there.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

SECTORS = ("tech", "health", "finance", "education", "retail", "logistics")
ROLES = {
    "tech": ("Backend engineer", "Data analyst", "QA tester", "DevOps engineer"),
    "health": ("Nurse", "Pharmacist", "Care assistant", "Lab technician"),
    "finance": ("Accountant", "Credit analyst", "Auditor", "Payroll officer"),
    "education": ("Teacher", "Tutor", "School librarian", "Lecturer"),
    "retail": ("Store manager", "Cashier", "Merchandiser", "Buyer"),
    "logistics": ("Warehouse lead", "Driver", "Dispatcher", "Forklift operator"),
}
COMPANIES = ("Acme", "Borealis", "Cobalt", "Delta", "Evergreen", "Fjord", "Granite", "Harbor", "Ion", "Juniper")
COUNTRIES = ("BR", "DE", "IN", "NG", "US")
LANGUAGE_OF = {"BR": ("pt", "en"), "DE": ("de", "en"), "IN": ("hi", "en"), "NG": ("en",), "US": ("en",)}
WORDINGS = {
    "country": {"BR": "Brazil", "DE": "Germany", "IN": "India", "NG": "Nigeria", "US": "United States"},
    "language": {"de": "German", "en": "English", "hi": "Hindi", "pt": "Portuguese", "unknown": "not stated"},
}
#: a bias table for the simulated recommender (docs/SIMULATED.md) written for this dataset: it pushes finance
#: jobs to seekers from Brazil and tech jobs (twice as hard) to Hindi speakers
BIAS_TABLE = {"country": {"BR": ["finance"]}, "language": {"hi": {"tech": 2.0}}}
N_USERS, N_APPLICATIONS, N_SHOWN = 300, 20, 10


def make(out: Path, seed: int = 2026) -> Path:
    """Write the example's files into ``out`` and return it."""
    rng = np.random.default_rng(seed)
    out.mkdir(parents=True, exist_ok=True)
    items = []
    for s_i, sector in enumerate(SECTORS):
        for j in range(40):
            role = ROLES[sector][j % 4]
            company = COMPANIES[(j // 4) % len(COMPANIES)]
            items.append((s_i * 40 + j + 1, f"{role} at {company}", sector))
    item_df = pd.DataFrame(items, columns=["item_id:token", "title:token", "sector:token"])
    countries = rng.choice(COUNTRIES, N_USERS, p=[0.2, 0.15, 0.25, 0.15, 0.25])
    languages = [str(rng.choice(LANGUAGE_OF[c])) for c in countries]
    languages = ["" if rng.random() < 0.1 else lang for lang in languages]
    user_df = pd.DataFrame(
        {"user_id:token": np.arange(1, N_USERS + 1), "country:token": countries, "language:token": languages}
    )
    by_sector = {s: [i for i, _, sec in items if sec == s] for s in SECTORS}
    inter = []
    for u in range(1, N_USERS + 1):
        own = SECTORS[int(rng.integers(len(SECTORS)))]
        t0 = 1_700_000_000 + int(rng.integers(0, 10_000_000))
        picks: list = []
        while len(picks) < N_APPLICATIONS:
            sector = own if rng.random() < 0.8 else SECTORS[int(rng.integers(len(SECTORS)))]
            item = int(rng.choice(by_sector[sector]))
            if item not in picks:
                picks.append(item)
        for t, item in enumerate(picks):
            inter.append((u, item, t0 + 3600 * t))
    inter_df = pd.DataFrame(inter, columns=["user_id:token", "item_id:token", "timestamp:float"])
    item_df.to_csv(out / "jobs.item", sep="\t", index=False)
    user_df.to_csv(out / "jobs.user", sep="\t", index=False)
    inter_df.to_csv(out / "jobs.inter", sep="\t", index=False)
    (out / "wordings.json").write_text(json.dumps(WORDINGS, indent=2) + "\n", encoding="utf-8")
    (out / "bias_table.json").write_text(json.dumps(BIAS_TABLE, indent=2) + "\n", encoding="utf-8")
    _exposure_log(rng, inter_df, item_df).to_csv(out / "exposure_log.csv", index=False)
    return out


OFFICE = ("tech", "finance", "education")  # the exposure log's item group "office"; the others are "field"


def _exposure_log(rng: np.random.Generator, inter: pd.DataFrame, items: pd.DataFrame) -> pd.DataFrame:
    """A job board's ranked lists (the top N_SHOWN ads per seeker): a ranker that scores office jobs up for
    every seeker and the seeker's sectors up a little, with noise; plus one ad per seeker drawn uniformly
    from the catalogue and logged at its rank in the seeker's full ranking (``random`` = 1; it may be one of
    the top N_SHOWN, or lie further down).  ``relevance``: the ad is in one of the seeker's two sectors (the one most
    of their applications are in, and their most applied-to sector of the other group, drawn when they
    applied to none): what they would apply to."""
    sector = dict(zip(items["item_id:token"], items["sector:token"]))
    all_items = items["item_id:token"].to_numpy()
    office = np.array([sector[i] in OFFICE for i in all_items])
    rows = []
    for u, applied in inter.groupby("user_id:token")["item_id:token"]:
        counts = pd.Series([sector[i] for i in applied]).value_counts()
        own = counts.index[0]
        other = [s for s in counts.index if (s in OFFICE) != (own in OFFICE)]
        second = other[0] if other else str(rng.choice([s for s in SECTORS if (s in OFFICE) != (own in OFFICE)]))
        mine = np.array([sector[i] in (own, second) for i in all_items])
        score = rng.normal(size=len(all_items)) + 1.0 * office + 0.8 * mine
        ranking = [int(i) for i in all_items[np.argsort(-score)]]
        pick = int(rng.choice(all_items))  # the random item: drawn uniformly, logged at its rank in the ranking
        for pos, item in enumerate(ranking, 1):
            if pos > N_SHOWN and item != pick:
                continue
            rows.append(
                {
                    "user_id": int(u),
                    "item_id": item,
                    "group": "office" if sector[item] in OFFICE else "field",
                    "position": pos,
                    "relevance": int(sector[item] in (own, second)),
                    "random": int(item == pick),
                }
            )
    return pd.DataFrame(rows)


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "jobs"
    print(f"wrote {make(target)}")
