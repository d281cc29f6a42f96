"""Ask the requests of several phases of a run in one call: fuller batches for a batched model.

A run's phases ask the recommender one after the other: calibration, then the Neutral and the Fair
baseline, then FACTER, then the CFR block of each method.  Some of these requests are known before
any answer comes back:

- every calibration request (:func:`facterlab.facter.calibration.calibration_plan`: rows, twins,
  placebos);
- every request of the two baselines, whose system prompts are static
  (:func:`facterlab.facter.monitor.baseline_requests`);
- the CFR block of each baseline (:func:`facterlab.facter.method_metrics.cfr_requests`): the sample,
  its flips and the baseline's prompt are all fixed before the run.

FACTER's own requests are not: its prompts show the rules mined from earlier answers.

:func:`prefetch` asks all the known ones in one ``recommender.predict`` call before the calibration.
The cached recommender (:class:`facterlab.models.cache.CachedRecommender`) groups them as the model
batches (one prompt-length bucket per batch for an in-process LLM) and writes each batch's answers
to the LLM cache; the phases then ask the same requests and read them back.  An answer depends only
on its request (the batch-independence tests of the LLM and the monitor's exact optimistic batching
rely on the same property), so the run's records are the same with and without it; only the batches
differ: a small run's phases of 4-10 rows become full batches.  Measured in docs/BENCHMARKS.md.

It runs when the recommender is a cached one (nothing else would keep the answers) and
``FACTERLAB_PREFETCH`` is not ``0``; the simulated and the fake recommender, which answer in
microseconds, are not cached and are left alone.
"""

from __future__ import annotations

import logging
from dataclasses import replace

import pandas as pd

from facterlab import envvars
from facterlab.config import RunConfig
from facterlab.facter.baselines import BASELINES
from facterlab.facter.calibration import calibration_plan
from facterlab.facter.method_metrics import cfr_requests, cfr_sample
from facterlab.facter.monitor import MonitorSettings, baseline_requests, prompt_items, request_seed, system_text
from facterlab.models.cache import CachedRecommender
from facterlab.progress import Progress

log = logging.getLogger(f"{__package__}.pipeline")  # the run's logger: its lines read "facter.pipeline: ..."

#: ``FACTERLAB_PREFETCH=0`` turns the prefetch off (an A/B benchmark, or to watch each phase generate)
ENV = "FACTERLAB_PREFETCH"


def enabled(recommender) -> bool:
    """Whether :func:`prefetch` pays for ``recommender``: it keeps answers in a cache, and
    ``FACTERLAB_PREFETCH`` is not ``0``.

    >>> enabled(object())
    False
    """
    return isinstance(recommender, CachedRecommender) and bool(envvars.get(ENV))


def known_requests(
    cfg: RunConfig,
    settings: MonitorSettings,
    calib_rows: pd.DataFrame,
    test_rows: pd.DataFrame,
    items: pd.DataFrame,
    domain: str,
    prompts,
    attribute_values: dict,
    twins=None,
) -> dict:
    """The requests of a run known before any answer (module docstring), by phase.

    Parameters
    ----------
    cfg : RunConfig
        The run's configuration.
    settings : MonitorSettings
        The monitor settings of the run (the baselines replace ``system_kind``).
    calib_rows, test_rows : pandas.DataFrame
        The calibration and the test rows, in walk order.
    items : pandas.DataFrame
        The catalogue.
    domain : str
        Domain word of the prompts.
    prompts : module
        The run's prompt module.
    attribute_values : dict
        Every value of each protected attribute.
    twins : sequence of mapping or None, default None
        Each test row's twin attributes (``facter.delta = "twin"``).

    Returns
    -------
    dict
        Phase name (``"calibration"``, ``"neutral"``, ``"fair"``, ``"neutral CFR"``, ``"fair CFR"``)
        -> list of PromptRequest.
    """
    plan = calibration_plan(calib_rows, items, cfg, domain, prompts, attribute_values)
    out = {"calibration": plan.all_requests()}
    titles = prompt_items(items)
    sample = cfr_sample(test_rows, cfg)
    pos = {int(r): i for i, r in enumerate(test_rows["row_id"])}

    def build(row: dict, system: str):  # as FacterMonitor.request_for with the seeds of pass 0
        seed = request_seed(cfg.seed, int(row["row_id"]), 0)
        return prompts.build_request(row, titles, system, cfg.protocol, cfg.metrics.k, domain, seed)

    for kind in BASELINES:
        st = replace(settings, system_kind=kind, name=settings.name or kind)
        reqs = baseline_requests(st, test_rows, titles, prompts, twins)
        out[kind] = reqs
        if not len(sample):
            continue
        static = prompts.system_prompt(kind, (), announce=None)
        if cfg.metrics.cfr_prompt == "last_pass":  # the prompt each row had at its turn (as row_system)
            systems = [system_text(reqs[pos[int(r)]]) if int(r) in pos else static for r in sample["row_id"]]
        else:
            systems = [static] * len(sample)

        out[f"{kind} CFR"] = [
            q for qs in cfr_requests(sample, systems, attribute_values, cfg, build)[1].values() for q in qs
        ]
    return out


def prefetch(recommender, phases: dict, progress: bool = False) -> int:
    """Ask every request of ``phases`` (name -> requests) in one call; return how many were asked.

    Parameters
    ----------
    recommender : CachedRecommender
        The run's recommender.
    phases : dict
        Phase name -> list of PromptRequest (:func:`known_requests`).
    progress : bool, default False
        Show a progress bar.

    Returns
    -------
    int
        The number of requests asked (duplicates included; the cache asks each distinct one once).
    """
    flat = [r for reqs in phases.values() for r in reqs]
    if not flat:
        return 0
    sizes = ", ".join(f"{name} {len(reqs)}" for name, reqs in phases.items() if reqs)
    log.info("prefetch: %d requests known before any answer, asked together (%s)", len(flat), sizes)
    with Progress(
        "prefetch", total=len(flat), unit="requests", log=log, bar=progress, advance_on_predictions=True
    ) as bar:
        recommender.predict(flat)
        bar.update_to(len(flat))
    return len(flat)
