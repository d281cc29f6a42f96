"""Datasets for FACTER (docs/FACTER.md §1.1): MovieLens-1M, MovieLens-100K, Amazon Movies & TV 2018, synthetic.

Every loader returns a :class:`Dataset` with the same tables, so that the interaction protocol
(:mod:`facterlab.data.protocol`, docs/FACTER.md §1.2) and the prompts (:mod:`facterlab.facter.prompts`, §1.3)
never look at the source format.

Dataset resolution: ``"auto"`` is ``"ml-1m"`` when its files lie in the data directory, else
``"ml-100k"`` when present, else ``"synthetic"`` (generated, clearly flagged ``is_synthetic=True``).
Explicit names never fall back: a missing file is a :class:`FileNotFoundError` saying which file, where
to put it, and where it comes from.

Modules: :mod:`~facterlab.data.dataset` (the :class:`Dataset` and the attribute vocabularies),
:mod:`~facterlab.data.loading` (resolution and loading by name), the loaders, :mod:`~facterlab.data.titles`
(title normalisation); this package re-exports their public names (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

from facterlab.data.dataset import (
    AGE_LABELS,
    AGE_ORDER,
    GENDERS,
    GENRES,
    OCCUPATION_LABELS,
    PROTECTED,
    Dataset,
    age_bucket,
)
from facterlab.data.imported import (
    DatasetError,
    export_recbole,
    from_tables,
    import_dataset,
    imported_names,
    load_imported,
    read_recbole,
    read_table,
)
from facterlab.data.loading import DATASET_DIRS, load_dataset, resolve_dataset

__all__ = [
    "Dataset",
    "load_dataset",
    "resolve_dataset",
    "from_tables",
    "read_recbole",
    "read_table",
    "import_dataset",
    "load_imported",
    "imported_names",
    "export_recbole",
    "DatasetError",
    "PROTECTED",
    "AGE_LABELS",
    "AGE_ORDER",
    "OCCUPATION_LABELS",
    "GENRES",
    "GENDERS",
    "age_bucket",
    "DATASET_DIRS",
]
