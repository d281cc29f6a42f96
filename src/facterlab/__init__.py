"""facterlab: reference toolkit for auditing the fairness of LLM recommenders.

Reproduces FACTER (conformal thresholding + prompt repair, ICML 2025, and its reproduction study)
and Simpson's paradox in recommender fairness (Prost et al., 2022).

Importing facterlab is cheap: torch, transformers and sentence-transformers are imported only when
a model is built (``facterlab.models``).
"""
__version__ = "0.1.0"

from facterlab.config import RunConfig, preset  # noqa: E402,F401
