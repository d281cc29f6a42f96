"""facterlab: reference toolkit for auditing the fairness of LLM recommenders.

Reproduces FACTER (conformal thresholding + prompt repair, ICML 2025, and its reproduction study)
and Simpson's paradox in recommender fairness (Prost et al., 2022).

Importing facterlab is cheap: torch, transformers and sentence-transformers are imported only when
a model is built (``facterlab.models``).
"""

__version__ = "0.1.0"

# OpenMP threads that sleep instead of spinning at barriers, set before torch loads: on a shared
# machine the spinning default is several times slower (facterlab.threads; FACTERLAB_THREADS=off).
from facterlab.threads import set_default_wait_policy as _set_default_wait_policy  # noqa: E402

_set_default_wait_policy()

# Log lines of long work (facterlab.progress): INFO inside a Jupyter kernel, FACTERLAB_LOG to choose;
# only the "facterlab" logger is touched (never the root logger), so tests and host programs stay quiet.
from facterlab.progress import auto_enable_logging as _auto_enable_logging  # noqa: E402
from facterlab.progress import enable_logging  # noqa: E402,F401

_auto_enable_logging()

from facterlab.config import RunConfig, preset  # noqa: E402,F401
