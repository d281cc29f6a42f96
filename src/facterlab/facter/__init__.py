"""FACTER: conformal thresholding and prompt repair (ICML 2025) and its reproduction (docs/FACTER.md §2-§3).

- :mod:`~facterlab.facter.neighbours`: blocked counterfactual-neighbour search (§2).
- :mod:`~facterlab.facter.scores`: S = d + lambda Delta and the item representation f(yhat) (§2).
- :mod:`~facterlab.facter.conformal`: Q0 = k-th smallest score, k = ceil((1-alpha)(n+1)); corrections.
- :mod:`~facterlab.facter.threshold`: online threshold rules ``one_sided`` | ``eq11_as_printed`` | ``aci``.
- :mod:`~facterlab.facter.repair`: violation FIFO and AVOID-rule mining.
- :mod:`~facterlab.facter.monitor`: the online loop with exact optimistic batching; its scorers
  (:mod:`~facterlab.facter.scorers`), rule-mining state (:mod:`~facterlab.facter.monitor_rules`) and
  result (:mod:`~facterlab.facter.monitor_result`).
- :mod:`~facterlab.facter.baselines`: Neutral and Fair.
- :mod:`~facterlab.facter.pipeline`: :func:`run_experiment` end to end; its phases calibration
  (:mod:`~facterlab.facter.calibration`), answers to catalogue items (:mod:`~facterlab.facter.answers`)
  and one method's metrics (:mod:`~facterlab.facter.method_metrics`).
- :mod:`~facterlab.facter.validation`: one validation pass over a run configuration.

Imports numpy/pandas only.
"""

from facterlab.facter.conformal import ConformalThreshold, conformal_k, min_calibration_size
from facterlab.facter.monitor import CalibrationState, FacterMonitor, MonitorResult, MonitorSettings, OnlineScorer
from facterlab.facter.neighbours import NeighbourIndex, counterfactual_neighbours
from facterlab.facter.pipeline import calibrate, run_experiment
from facterlab.facter.repair import ViolationBuffer, mine_rules
from facterlab.facter.runfolder import RunResult, read_run_folder
from facterlab.facter.scores import ItemRepresenter, nonconformity_scores
from facterlab.facter.threshold import OnlineThreshold, update_threshold

__all__ = [
    "ConformalThreshold",
    "conformal_k",
    "min_calibration_size",
    "CalibrationState",
    "FacterMonitor",
    "MonitorResult",
    "MonitorSettings",
    "OnlineScorer",
    "NeighbourIndex",
    "counterfactual_neighbours",
    "RunResult",
    "read_run_folder",
    "calibrate",
    "run_experiment",
    "ViolationBuffer",
    "mine_rules",
    "ItemRepresenter",
    "nonconformity_scores",
    "OnlineThreshold",
    "update_threshold",
]
