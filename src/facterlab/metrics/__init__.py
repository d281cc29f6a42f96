"""Metrics of docs/FACTER.md §4: ranking quality, catalogue mapping and Valid@k, SNSR/SNSV, CFR.

Pure numpy/pandas at import time (rapidfuzz only inside the fuzzy mapper).
"""

from facterlab.metrics.catalogue import CatalogueMapper, normalise_title, valid_at_k, valid_per_row
from facterlab.metrics.counterfactual import FLIP_STRATEGIES, cfr, cfr_summary, flip_attributes, sample_cfr_rows
from facterlab.metrics.embeddings import as_row_vectors, normalise_rows, normalised_row_means
from facterlab.metrics.fairness import group_centroids, jaccard_at_k, snsr_fairllm, snsr_proxy
from facterlab.metrics.ranking import (
    compact_ranking,
    is_unmapped,
    ndcg_at_k,
    random_ranking_floor,
    ranking_metrics,
    recall_at_k,
)

__all__ = [
    "CatalogueMapper",
    "normalise_title",
    "valid_at_k",
    "valid_per_row",
    "FLIP_STRATEGIES",
    "cfr",
    "cfr_summary",
    "flip_attributes",
    "sample_cfr_rows",
    "as_row_vectors",
    "normalise_rows",
    "normalised_row_means",
    "group_centroids",
    "jaccard_at_k",
    "snsr_fairllm",
    "snsr_proxy",
    "compact_ranking",
    "is_unmapped",
    "ndcg_at_k",
    "random_ranking_floor",
    "ranking_metrics",
    "recall_at_k",
]
