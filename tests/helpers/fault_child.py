"""Child process for tests/facter/test_faults.py: one fake-model run that SIGKILLs itself at a chosen point.

``python fault_child.py RESULTS_DIR FAULT`` with FAULT one of

- ``none``: run to the end;
- ``phase:<name>``: killed at the second recommender call inside phase <name> (calibration, neutral,
  fair, facter, metrics), i.e. in the middle of that phase;
- ``write:<file>``: killed while the run folder's temporary copy of <file> is half written;
- ``write:rename``: killed between moving an existing run folder aside and renaming the new one in.

The fake recommender answers through the SQLite LLM cache (``$FACTERLAB_CACHE``), as a real model does.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from facter_world import make_world

from facterlab.config import preset  # noqa: E402
from facterlab.facter import (
    pipeline,  # noqa: E402
    runfolder,  # noqa: E402
)
from facterlab.models.cache import CachedRecommender  # noqa: E402
from facterlab.models.fake import FakeRecommender, HashEncoder  # noqa: E402


def config():
    return preset(
        "repro",
        data__dataset="synthetic",
        data__n_rows=80,
        facter__passes=2,
        facter__tau_rho=0.8,
        metrics__cfr_rows=8,
        metrics__snsr_min_group=5,
    )


def die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


STATE = {"phase": "data", "calls": 0}


class Killable(FakeRecommender):
    target = None

    def predict(self, requests):
        if STATE["phase"] == self.target:
            STATE["calls"] += 1
            if STATE["calls"] >= 2:
                die()
        return super().predict(requests)


def enter(phase: str, fn):
    def wrapped(*a, **kw):
        STATE["phase"], STATE["calls"] = phase, 0
        return fn(*a, **kw)

    return wrapped


def main(results: str, fault: str) -> None:
    ds = make_world(n_users=80)
    kind, _, what = fault.partition(":")
    if kind == "phase":
        Killable.target = what
        if what in ("calibration", "neutral", "fair", "metrics"):
            # the prefetch asks these phases' requests first (facterlab.facter.prefetch; metrics: the
            # baselines' CFR blocks): without it each phase calls the model itself, and the kill lands inside it
            os.environ["FACTERLAB_PREFETCH"] = "0"
        pipeline.prefetch.prefetch = enter("prefetch", pipeline.prefetch.prefetch)
        pipeline.calibrate = enter("calibration", pipeline.calibrate)
        base = pipeline.run_baseline
        pipeline.run_baseline = lambda kind_, *a, **kw: enter(kind_, base)(kind_, *a, **kw)
        run = pipeline.FacterMonitor.run

        def monitor_run(self, *a, **kw):  # the baselines run a FacterMonitor too: keep their phase
            if self.name == "facter":
                STATE["phase"], STATE["calls"] = "facter", 0
            return run(self, *a, **kw)

        pipeline.FacterMonitor.run = monitor_run
        pipeline.method_metrics = enter("metrics", pipeline.method_metrics)
    elif kind == "write" and what == "rename":
        real_replace = os.replace
        n = {"calls": 0}

        def replace(a, b):
            real_replace(a, b)
            if Path(str(a)).name != "metrics.json":
                n["calls"] += 1
                if n["calls"] == 1 and Path(str(b)).name.startswith(".old-"):
                    die()  # the old folder is aside, the new one not yet in place

        runfolder.os.replace = replace
    elif kind == "write":
        import pandas as pd

        real_to_parquet = pd.DataFrame.to_parquet

        def to_parquet(self, path, *a, **kw):
            real_to_parquet(self, path, *a, **kw)
            if Path(str(path)).name == what:
                data = Path(path).read_bytes()
                Path(path).write_bytes(data[: len(data) // 2])
                die()

        pd.DataFrame.to_parquet = to_parquet
        if what.endswith(".json"):
            real_write_text = Path.write_text

            def write_text(self, text, *a, **kw):
                if self.name == what and self.parent.name.startswith(".tmp-"):
                    real_write_text(self, text[: len(text) // 2], *a, **kw)
                    die()
                return real_write_text(self, text, *a, **kw)

            Path.write_text = write_text
    rec = CachedRecommender(
        Killable(
            ds.items, protocol="open", mode="biased", obey_rules=True, bias_share=0.5, bias_features={"F": ("Romance",)}
        )
    )
    res = pipeline.run_experiment(
        config(), recommender=rec, encoder=HashEncoder(), dataset=ds, out_dir=results, progress=False
    )
    print(res.run_id)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
