"""Your own recommender (issue 41, item 3): :class:`facterlab.models.custom.FunctionRecommender` driving
runs end to end, its errors and its fingerprint, and :class:`facterlab.models.custom.RestRecommender`
against a stand-in REST service (stdlib ``http.server`` in a thread, a JSON shape that is not OpenAI's):
request templates, answer paths, a timeout, malformed answers, the API key kept out of every output,
and ``facterlab run --model rest:<name>``."""

from __future__ import annotations

import importlib.util
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pandas as pd
import pytest

from facterlab.config import ModelConfig, config_hash, config_to_dict, preset
from facterlab.datatypes import PromptRequest, takes_system_prompt
from facterlab.facter.pipeline import run_experiment
from facterlab.facter.prompts import build_request
from facterlab.models.cache import CachedRecommender, PredictionCache
from facterlab.models.custom import (
    PARSE_NOT_CANDIDATE,
    PARSE_UNKNOWN,
    FunctionRecommender,
    RecommenderError,
    RestRecommender,
    extract_answer,
    source_version,
)
from facterlab.models.rankers import expected_fingerprint, make_recommender
from facterlab.models.served_http import ServerError, ServerUnavailable

ITEMS = pd.DataFrame(
    {
        "item_id": [1, 2, 3, 4, 5, 6],
        "title": ["Alien (1979)", "Heat (1995)", "Babe (1995)", "Fargo (1996)", "Casino (1995)", "Up (2009)"],
        "features": [["Horror"], ["Crime"], ["Family"], ["Crime"], ["Crime"], ["Family"]],
    }
)
ROW = {"row_id": 7, "gender": "F", "age": "25-34", "occupation": "writer", "history": [1, 2], "candidates": [3, 4, 5]}


def _req(protocol: str = "open", k: int = 3, **row) -> PromptRequest:
    return build_request({**ROW, **row}, ITEMS, "Be fair.", protocol=protocol, k=k)


def _fast_cfg(**kw):
    return preset(
        "repro",
        data__dataset="synthetic",
        data__n_rows=80,
        model__encoder="hash-encoder",
        facter__passes=1,
        facter__tau_rho=0.8,
        metrics__cfr_rows=8,
        metrics__snsr_min_group=5,
        **kw,
    )


# --------------------------------------------------------------------------------- function adapter


def _blind(history, attributes, candidates):
    """The items nearest the last one seen, whoever the user is: never reads the attributes."""
    pool = candidates if candidates is not None else list(range(1, 400))
    return sorted((i for i in pool if i not in history), key=lambda i: (abs(i - history[-1]), i))[:10]


def _by_gender(history, attributes, candidates):
    """A biased recommender: women get the farthest items instead."""
    pool = candidates if candidates is not None else list(range(1, 400))
    ranked = sorted((i for i in pool if i not in history), key=lambda i: (abs(i - history[-1]), i))
    return (ranked[::-1] if attributes["gender"] == "F" else ranked)[:10]


@pytest.mark.parametrize("protocol", ["open", "rank"])
def test_a_function_recommender_drives_a_run_and_its_bias_shows_in_cfr(protocol, tmp_path):
    seen: list = []

    def spy(history, attributes, candidates):
        seen.append((list(history), dict(attributes), candidates))
        return _by_gender(history, attributes, candidates)

    from facterlab.data import load_dataset

    ds = load_dataset("synthetic", tmp_path / "data")
    biased = FunctionRecommender(spy, ds.items, name="by_gender", version="1")
    cfg = _fast_cfg(protocol=protocol)
    res = run_experiment(cfg, recommender=biased, out_dir=tmp_path / "b", progress=False, dataset=ds)
    blind = run_experiment(
        cfg, recommender=FunctionRecommender(_blind, ds.items), out_dir=tmp_path / "u", progress=False, dataset=ds
    )
    assert res.record.config.fingerprints.llm == "function:by_gender:1"
    assert blind.record.config.fingerprints.llm.startswith("function:_blind:src-")
    assert res.run_id != blind.run_id
    # what the function was given: item ids oldest first, the three attributes, candidates only for rank
    hist, attrs, cands = seen[0]
    assert hist and all(isinstance(i, int) for i in hist)
    assert set(attrs) == {"gender", "age", "occupation"} and attrs["gender"] in ("M", "F")
    assert (cands is None) == (protocol == "open")
    rows = pd.read_parquet(res.out_dir / "rows_neutral.parquet")
    assert set(rows["parse_status"]) == {"ok"}
    assert all(json.loads(r) for r in rows["raw"])  # the answer as returned
    # flipping gender changes the biased function's list, never the blind one's: the counterfactual
    # metrics see it (the monitor and the metrics apply to a recommender without a system prompt)
    cfr = res.record.metrics.methods["neutral"].flat()["cfr_multi"]
    assert cfr > 0
    assert blind.record.metrics.methods["neutral"].flat()["cfr_multi"] == 0


def test_the_twin_monitor_with_the_null_threshold_flags_a_biased_function_and_not_a_blind_one(tmp_path):
    from facterlab.data import load_dataset

    ds = load_dataset("synthetic", tmp_path / "data")
    cfg = _fast_cfg(facter__delta="twin", facter__threshold="null")
    flagged = {}
    for fn in (_by_gender, _blind):
        res = run_experiment(cfg, recommender=FunctionRecommender(fn, ds.items), out_dir=tmp_path / fn.__name__,
                             progress=False, dataset=ds)  # fmt: skip
        flagged[fn.__name__] = res.record.metrics.methods["neutral"].violations["adaptive"][0]
    assert flagged["_by_gender"] > 0 and flagged["_blind"] == 0


def test_function_inputs_follow_the_request_meta_and_its_protected_attributes():
    got = {}

    def fn(history, attributes, candidates):
        got.update(history=history, attributes=attributes, candidates=candidates)
        return [6]

    rec = FunctionRecommender(fn, ITEMS, name="f", version="1")
    assert rec.predict([_req()])[0].titles == ("Up (2009)",)
    assert got == {
        "history": [1, 2],
        "attributes": {"gender": "F", "age": "25-34", "occupation": "writer"},
        "candidates": None,
    }
    # a dataset's own attributes (meta["protected"] names them, in order)
    req = PromptRequest.from_messages(
        [], meta=(("protected", ("country", "language")), ("country", "BR"), ("history_ids", (1,))), k=2
    )
    rec.predict([req])
    assert got["attributes"] == {"country": "BR", "language": None} and list(got["attributes"]) == [
        "country",
        "language",
    ]
    rec.predict([_req("rank")])
    assert got["candidates"] == [3, 4, 5]


def test_unknown_items_are_dropped_with_a_named_status_and_counted(caplog):
    rec = FunctionRecommender(lambda h, a, c: [999, "Heat (1995)", "No Such Film", 4], ITEMS, name="f", version="1")
    with caplog.at_level(logging.WARNING, logger="facterlab.models.custom"):
        pred = rec.predict([_req(k=5)])[0]
    assert pred.titles == ("Heat (1995)", "Fargo (1996)")
    assert pred.parse_status == PARSE_UNKNOWN
    assert json.loads(pred.raw) == [999, "Heat (1995)", "No Such Film", 4]
    assert rec.n_dropped == 2 and rec.n_answers == 1
    assert "1 of 1 answers named 2 items" in caplog.text and "999" in caplog.text
    # re-ranking: a catalogue item that is not a candidate is dropped too, and the permutation completed
    rank = FunctionRecommender(lambda h, a, c: [5, 1, "Babe (1995)"], ITEMS, name="g", version="1")
    pred = rank.predict([_req("rank")])[0]
    assert pred.titles == ("Casino (1995)", "Babe (1995)", "Fargo (1996)")
    assert pred.parse_status == PARSE_NOT_CANDIDATE and pred.n_model_positions == 2
    # strings of digits are ids when no title matches; an empty answer is "empty"
    digits = FunctionRecommender(lambda h, a, c: ["4"], ITEMS, name="d", version="1").predict([_req()])[0]
    assert digits.titles == ("Fargo (1996)",) and digits.parse_status == "ok"
    empty = FunctionRecommender(lambda h, a, c: [], ITEMS, name="e", version="1").predict([_req("rank")])[0]
    assert empty.parse_status == "empty" and empty.n_model_positions == 0 and len(empty.titles) == 3


def _boom(history, attributes, candidates):
    return 1 / 0


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (
            _boom,
            r"function '_boom' raised on row 7: ZeroDivisionError: division by zero at .*test_custom_recommenders.py:\d+$",
        ),
        (lambda h, a, c: None, r"returned NoneType None; it must return a list of item ids"),
        (lambda h, a, c: "Heat (1995)", r"returned str 'Heat \(1995\)'; it must return a list"),
        (lambda h, a, c: {"items": [1]}, r"returned dict"),
        (lambda h, a, c: [1.0, 2.0], r"returned float 1.0 in its list; each element must be an item id"),
    ],
)
def test_a_failing_or_malformed_function_is_one_line_naming_it_and_the_row(fn, expected):
    rec = FunctionRecommender(fn, ITEMS, version="1")
    with pytest.raises(RecommenderError, match=expected) as err:
        rec.predict([_req()])
    assert "\n" not in str(err.value) and "row 7" in str(err.value)
    # no chained traceback of the user's code under the line
    assert err.value.__cause__ is None and (err.value.__context__ is None or err.value.__suppress_context__)


def test_a_raising_function_stops_the_run_before_a_run_folder(tmp_path):
    from facterlab.data import load_dataset

    ds = load_dataset("synthetic", tmp_path / "data")
    calls = []

    def flaky(history, attributes, candidates):
        calls.append(1)
        if len(calls) == 5:
            raise KeyError("user 17 has no embedding")
        return _blind(history, attributes, candidates)

    with pytest.raises(
        RecommenderError, match=r"function 'flaky' raised on row \d+: KeyError: 'user 17 has no embedding'"
    ):
        run_experiment(_fast_cfg(), recommender=FunctionRecommender(flaky, ds.items, version="1"),
                       out_dir=tmp_path / "r", progress=False, dataset=ds)  # fmt: skip
    assert len(calls) == 5  # nothing asked after the error
    assert not list((tmp_path / "r").rglob("metrics.json"))


def _module(path: Path, body: str):
    path.write_text(f"def rec(history, attributes, candidates):\n    return {body}\n")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.rec


def test_the_fingerprint_follows_the_functions_source(tmp_path):
    one = _module(tmp_path / "one.py", "[1, 2]")
    same = _module(tmp_path / "same.py", "[1, 2]")
    edited = _module(tmp_path / "edited.py", "[2, 1]")
    fp = FunctionRecommender(one, ITEMS).fingerprint
    assert fp.startswith("function:rec:src-") and fp == f"function:rec:{source_version(one)}"
    assert FunctionRecommender(same, ITEMS).fingerprint == fp
    assert FunctionRecommender(edited, ITEMS).fingerprint != fp
    # a declared name/version wins, and is the fingerprint as written
    assert FunctionRecommender(edited, ITEMS, name="ranker", version="2026-12").fingerprint == "function:ranker:2026-12"
    # no source to read: a version must be declared
    scope: dict = {}
    exec("def typed(h, a, c):\n    return [1]\n", scope)  # noqa: S102 - a function typed at a prompt
    with pytest.raises(ValueError, match="cannot read the source of 'typed'.*version="):
        FunctionRecommender(scope["typed"], ITEMS)
    assert FunctionRecommender(scope["typed"], ITEMS, version="1").fingerprint == "function:typed:1"
    # a partial: its function's source and its arguments' text; an object's address is no stable text
    import functools

    assert source_version(functools.partial(one, k=3)) != source_version(functools.partial(one, k=4))
    assert source_version(functools.partial(one, k=3)) == source_version(functools.partial(same, k=3))
    with pytest.raises(ValueError, match="no stable text"):
        source_version(functools.partial(one, model=object()))


# ------------------------------------------------------------------------------------- REST adapter


class RestStandIn:
    """A recommendation service of another shape than OpenAI's, on 127.0.0.1: ``POST /recommend`` takes
    ``{"user": {...}, "history": [...], "k": n, "candidates": [...] or null}`` and answers
    ``{"result": {"items": [{"id": ..., "score": ...}, ...]}}``: the candidates (or ids 1..40 not in the
    history) in reverse order, women's list reversed again.  ``mode``: ``"ok"``, ``"slow"`` (sleeps
    ``delay`` s first), ``"malformed"`` (``{"result": {}}``), ``"text"`` (a body that is not JSON),
    ``"echo-key"`` (HTTP 403 whose body quotes the Authorization header).  ``key``: HTTP 401 without
    ``Authorization: Bearer <key>``."""

    def __init__(self, mode: str = "ok", key: str | None = None, delay: float = 0.0):
        self.mode, self.key, self.delay = mode, key, delay
        self.bodies: list = []
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"null")
                stand_in.bodies.append(body)
                auth = self.headers.get("Authorization", "")
                if stand_in.mode == "echo-key":
                    return self._send(403, json.dumps({"detail": f"forbidden: {auth}"}).encode())
                if stand_in.key is not None and auth != f"Bearer {stand_in.key}":
                    return self._send(401, b'{"detail": "no key"}')
                if stand_in.mode == "slow":
                    time.sleep(stand_in.delay)
                if stand_in.mode == "malformed":
                    return self._send(200, b'{"result": {}}')
                if stand_in.mode == "text":
                    return self._send(200, b"<html>maintenance</html>")
                pool = body["candidates"] or [i for i in range(1, 41) if i not in body["history"]]
                ranked = list(reversed(pool))
                if body["user"].get("gender") == "F":
                    ranked.reverse()
                items = [{"id": i, "score": 1.0 / (n + 1)} for n, i in enumerate(ranked[: body["k"]])]
                return self._send(200, json.dumps({"result": {"items": items}}).encode())

            def _send(self, status: int, payload: bytes):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/recommend"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


TEMPLATE = {"user": "$attributes", "history": "$history_ids", "k": "$k", "candidates": "$candidate_ids"}
PATH = "result.items[*].id"


def test_rest_fills_the_template_and_reads_the_answer_path():
    with RestStandIn() as svc:
        rec = RestRecommender(svc.url, TEMPLATE, PATH, items=ITEMS, name="svc", concurrency=2)
        open_pred, rank_pred, male = rec.predict([_req(k=2), _req("rank"), _req("rank", gender="M")])
    open_body = [b for b in svc.bodies if b["candidates"] is None]  # concurrency 2: any arrival order
    assert open_body == [
        {"user": {"gender": "F", "age": "25-34", "occupation": "writer"}, "history": [1, 2], "k": 2, "candidates": None}
    ]
    assert sorted(len(b["candidates"] or []) for b in svc.bodies) == [0, 3, 3]
    assert open_pred.titles == ("Babe (1995)", "Fargo (1996)") and open_pred.parse_status == "ok"
    assert rank_pred.titles == ("Babe (1995)", "Fargo (1996)", "Casino (1995)")
    assert male.titles == ("Casino (1995)", "Fargo (1996)", "Babe (1995)")
    assert rank_pred.n_model_positions == 3
    assert not rec.takes_system_prompt and not takes_system_prompt(CachedRecommender(rec, PredictionCache(":memory:")))
    with_system = RestRecommender(svc.url, {"sys": "$system", **TEMPLATE}, PATH, name="svc")
    assert with_system.takes_system_prompt and with_system.body(_req())["sys"] == "Be fair."


def test_answer_paths_and_what_a_path_that_misses_says():
    reply = {"data": {"recommendations": ["Heat (1995)", 4], "pages": [{"ids": [1]}, {"ids": [2, 3]}]}}
    assert extract_answer(reply, "data.recommendations") == ["Heat (1995)", 4]
    assert extract_answer(reply, "data.pages[-1].ids") == [2, 3]
    assert extract_answer({"items": [[5, 0.9], [6, 0.8]]}, "items[*][0]") == [5, 6]
    for path, msg in [
        ("data.recs", "no key 'recs' in an object with keys 'recommendations', 'pages'"),
        ("data.pages[5].ids", "at 'data.pages[5]', no such element in a list of 2"),
        ("data.recommendations[0]", "expected a list of item ids or titles, found str"),
    ]:
        with pytest.raises(ValueError, match=msg.replace("[", r"\[").replace("]", r"\]")):
            extract_answer(reply, path)


@pytest.mark.parametrize(
    ("mode", "cls", "expected"),
    [
        (
            "malformed",
            ServerError,
            r"answered \(row 7\) without the answer path 'result.items\[\*\].id': at 'result.items', no key 'items'",
        ),
        ("text", ServerError, r"answered \(row 7\) with a body that is not JSON"),
        (
            "slow",
            ServerUnavailable,
            r"gave no answer \(row 7\): (no complete answer within the 0.5 s deadline|a read timed out).* \(deadline 0.5 s, 0 retries",
        ),
    ],
)
def test_rest_malformed_answers_and_timeouts_are_one_line(mode, cls, expected):
    with RestStandIn(mode, delay=6.0) as svc:
        rec = RestRecommender(svc.url, TEMPLATE, PATH, items=ITEMS, name="svc", timeout=0.5, retries=0)
        t0 = time.monotonic()
        with pytest.raises(cls, match=expected) as err:
            rec.predict([_req()])
    assert time.monotonic() - t0 < 5.0  # the deadline ended the slow request, long before its answer
    assert "\n" not in str(err.value)


def test_rest_waits_say_how_many_requests_are_answered(monkeypatch, caplog):
    from facterlab.models import custom

    monkeypatch.setattr(custom, "PROGRESS_EVERY", 0.2)
    with RestStandIn("slow", delay=0.8) as svc, caplog.at_level(logging.INFO, logger="facterlab.models.custom"):
        rec = RestRecommender(svc.url, TEMPLATE, PATH, items=ITEMS, name="svc", timeout=10)
        assert rec.predict([_req()])[0].parse_status == "ok"
    assert "rest:svc at http://127.0.0.1:" in caplog.text and "0 of 1 requests answered after" in caplog.text


def test_rest_settings_are_checked_before_any_request():
    with pytest.raises(ValueError, match=r"unknown placeholder '\$histroy_ids'"):
        RestRecommender("http://127.0.0.1:9/r", {"h": "$histroy_ids"}, PATH)
    with pytest.raises(ValueError, match="at most one"):
        RestRecommender("http://127.0.0.1:9/r", TEMPLATE, "a[*].b[*]")
    with pytest.raises(ValueError, match="holds credentials"):
        RestRecommender("http://user:secret@127.0.0.1:9/r", TEMPLATE, PATH)
    with pytest.raises(ValueError, match="needs request_template, answer_path"):
        ModelConfig(llm="rest:svc", server_url="http://127.0.0.1:9/r")
    with pytest.raises(ValueError, match="is not a REST endpoint"):
        ModelConfig(answer_path="items")


def test_rest_fingerprint_covers_url_template_path_and_version_not_the_transport():
    base = RestRecommender("http://h:1/r", TEMPLATE, PATH, name="svc", version="1")
    assert base.fingerprint.startswith("rest:svc@1:")
    same = RestRecommender("http://h:1/r", dict(reversed(TEMPLATE.items())), PATH, name="svc", version="1",
                           timeout=5, retries=0, concurrency=1, api_key_env="K")  # fmt: skip
    assert same.fingerprint == base.fingerprint
    for other in (
        RestRecommender("http://h:2/r", TEMPLATE, PATH, name="svc", version="1"),
        RestRecommender("http://h:1/r", {**TEMPLATE, "k": 10}, PATH, name="svc", version="1"),
        RestRecommender("http://h:1/r", TEMPLATE, "result.items", name="svc", version="1"),
        RestRecommender("http://h:1/r", TEMPLATE, PATH, name="svc", version="2"),
    ):
        assert other.fingerprint != base.fingerprint
    # the config's and the command line's template is canonical JSON text: the same fingerprint
    cfg = ModelConfig(llm="rest:svc@1", server_url="http://h:1/r", request_template=json.dumps(TEMPLATE, indent=2),
                      answer_path=PATH)  # fmt: skip
    assert expected_fingerprint(cfg, "open") == base.fingerprint
    assert make_recommender(cfg, "open", cache=False).fingerprint == base.fingerprint


def test_run_experiment_builds_a_rest_recommender_from_the_config(tmp_path):
    """``run_experiment(cfg)`` with ``model.llm = "rest:<name>"`` (no recommender passed): re-ranking answers
    are named through the row's candidates, open-generation ids through the run's catalogue."""
    from facterlab.data import load_dataset

    ds = load_dataset("synthetic", tmp_path / "data")
    with RestStandIn() as svc:
        kw = dict(model__llm="rest:svc", model__server_url=svc.url, model__request_template=json.dumps(TEMPLATE),
                  model__answer_path=PATH)  # fmt: skip
        res = run_experiment(_fast_cfg(protocol="rank", **kw), out_dir=tmp_path / "r", progress=False, dataset=ds)
        assert res.record.config.fingerprints.llm.startswith("rest:svc:")
        rows = pd.read_parquet(res.out_dir / "rows_fair.parquet")
        assert set(rows["parse_status"]) == {"ok"} and (rows["n_model_positions"] == 10).all()
        # open generation: the pipeline builds the endpoint with the run's catalogue, so its ids are named
        res = run_experiment(_fast_cfg(**kw), out_dir=tmp_path / "o", progress=False, dataset=ds)
        rows = pd.read_parquet(res.out_dir / "rows_fair.parquet")
        titles = set(ds.items["title"])
        assert set(rows["parse_status"]) == {"ok"} and all(set(t) <= titles for t in rows["titles"])


#: run ids (config hashes) of existing configs, computed by the code before the REST fields were added
#: (commit 2cc3fcd): the new fields, None by default, leave every one unchanged
HASHES_BEFORE = {
    "repro": "31c52dea2326",
    "icml": "a89d637edd7a",
    "facterlab": "632505e43649",
    "served": "839913320163",
    "simulated": "eaa0e4417ee5",
    "fake-rank": "6e097a4f2692",
}


def test_the_new_fields_leave_every_existing_run_id_unchanged():
    cfgs = {
        "repro": preset("repro"),
        "icml": preset("icml"),
        "facterlab": preset("facterlab"),
        "served": preset("repro", model__llm="openai:m", model__server_url="http://h:8000", model__api_key_env="K"),
        "simulated": preset("repro", model__llm="simulated"),
        "fake-rank": preset("repro", model__llm="fake", model__encoder="hash-encoder", protocol="rank"),
    }
    assert {k: config_hash(c) for k, c in cfgs.items()} == HASHES_BEFORE
    rest = preset("repro", model__llm="rest:svc", model__server_url="http://h/r",
                  model__request_template=json.dumps(TEMPLATE), model__answer_path=PATH)  # fmt: skip
    saved = config_to_dict(rest)["model"]
    assert json.loads(saved["request_template"]) == TEMPLATE and saved["answer_path"] == PATH
    assert config_hash(rest) != config_hash(preset("repro"))


def test_facterlab_run_with_a_rest_endpoint_keeps_its_key_out_of_every_output(tmp_path, monkeypatch, capsys, caplog):
    from facterlab.cli import main

    secret = "sk-test-4f9c2b1e77"
    monkeypatch.setenv("REC_KEY", secret)
    template = tmp_path / "template.json"
    template.write_text(json.dumps(TEMPLATE))
    out = tmp_path / "results"
    argv = ["run", "--dataset", "synthetic", "--model", "rest:svc@1", "--request-template", str(template),
            "--answer-path", PATH, "--api-key-env", "REC_KEY", "--encoder", "hash-encoder",
            "--n-rows", "80", "--passes", "1", "--cfr-rows", "8", "--snsr-min-group", "5", "--no-progress",
            "--out-dir", str(out), "--data-dir", str(tmp_path / "data")]  # fmt: skip
    with caplog.at_level(logging.INFO), RestStandIn(key=secret) as svc:
        assert main([*argv, "--server-url", svc.url]) == 0
        assert svc.bodies and all(set(b) == set(TEMPLATE) for b in svc.bodies)
    with RestStandIn("echo-key") as bad:  # a service that quotes the key back in its refusal
        assert main([*argv, "--server-url", bad.url, "--out-dir", str(tmp_path / "bad")]) == 1
    text = capsys.readouterr()
    assert "answered HTTP 403" in text.err and "Bearer ***" in text.err  # masked by the served transport
    (run,) = (out / "runs").iterdir()
    config = json.loads((run / "config.json").read_text())["config"]["model"]
    assert config["llm"] == "rest:svc@1" and config["answer_path"] == PATH and "api_key_env" in config
    # open generation: the endpoint's item ids were named with the dataset's catalogue
    rows = pd.read_parquet(run / "rows_neutral.parquet")
    assert set(rows["parse_status"]) == {"ok"} and all(len(t) == 10 for t in rows["titles"])
    files = [p for p in tmp_path.rglob("*") if p.is_file()] + [p for p in Path(_cache_dir()).rglob("*") if p.is_file()]
    assert files
    for blob in [p.read_bytes() for p in files] + [text.out.encode(), text.err.encode(), caplog.text.encode()]:
        assert secret.encode() not in blob
    # the CLI without the key's variable set: one line before any work
    monkeypatch.delenv("REC_KEY")
    assert main([*argv, "--server-url", "http://127.0.0.1:9/recommend"]) == 1
    assert "REC_KEY, which is not set here" in capsys.readouterr().err


def _cache_dir():
    from facterlab.config import cache_dir

    return cache_dir()


@pytest.mark.parametrize(
    ("template", "extra", "says"),
    [
        ('{"h": "$histroy_ids"}', ["--answer-path", "items"], "unknown placeholder '$histroy_ids'"),
        ('{"h": "$history_ids"', ["--answer-path", "items"], "not JSON (Expecting"),
        ('{"h": "$history_ids"}', [], "needs answer_path"),
        ('{"h": "$history_ids"}', ["--answer-path", "a[*].b[*]"], "at most one [*]"),
    ],
)
def test_cli_rest_settings_are_one_line_before_any_work(template, extra, says, tmp_path, capsys):
    from facterlab.cli import main

    (tmp_path / "t.json").write_text(template)
    argv = ["run", "--model", "rest:svc", "--server-url", "http://127.0.0.1:9/r", "--request-template",
            str(tmp_path / "t.json"), *extra, "--data-dir", str(tmp_path / "data"), "--out-dir", str(tmp_path / "r")]  # fmt: skip
    assert main(argv) == 1
    err = [ln for ln in capsys.readouterr().err.splitlines() if "error" in ln]
    assert len(err) == 1 and says in err[0]
    assert not (tmp_path / "data").exists() and not (tmp_path / "r").exists()  # nothing read or written
