"""The paper profile's code path on tiny random checkpoints of its three backbones (no hub).

The ``paper`` profile runs ``llama3-8b``, ``llama2-7b`` and ``mistral-7b`` on a GPU.  Nothing in CI
downloads them, so this builds, in a temporary folder, a tiny randomly initialised checkpoint of each
architecture (``LlamaForCausalLM`` with grouped-query attention and Llama-3's rope base; Llama-2's
plain multi-head attention; ``MistralForCausalLM`` with its sliding window) with a small byte-level
BPE tokenizer carrying the family's special tokens and its real chat template (Llama-3 header tokens;
Llama-2 ``[INST] <<SYS>>``; Mistral-v0.2 ``[INST]``, which rejects a system turn, so the loader's
merge-into-user fallback runs).  Then it loads each through the same registry path as a hub model's
local copy and runs what a GPU user runs: ``run_experiment`` with the open protocol and both rankers
of the rank protocol, batch-independent sampling, and the likelihood ranker's shared-prompt scoring
against a full forward pass in float32 and in bfloat16 (bf16 matmuls run on CPU in torch; the
package itself allows bf16 on CUDA only, so the bf16 check bypasses that guard).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("tokenizers")

from facter_world import make_world

from facterlab.config import ModelConfig, preset  # noqa: E402

LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim"
    " + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
LLAMA2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' ' + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)
MISTRAL_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}"
)

SPECIALS = [
    "<unk>",
    "<s>",
    "</s>",
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
]
FAMILIES = {  # name: (config class, extra config, bos, eos, template)
    "llama3": (
        "LlamaConfig",
        "LlamaForCausalLM",
        {"num_key_value_heads": 2, "rope_theta": 500000.0},
        "<|begin_of_text|>",
        "<|eot_id|>",
        LLAMA3_TEMPLATE,
    ),
    "llama2": ("LlamaConfig", "LlamaForCausalLM", {"num_key_value_heads": 4}, "<s>", "</s>", LLAMA2_TEMPLATE),
    "mistral": (
        "MistralConfig",
        "MistralForCausalLM",
        {"num_key_value_heads": 2, "sliding_window": 4096},
        "<s>",
        "</s>",
        MISTRAL_TEMPLATE,
    ),
}


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def _corpus(ds) -> list:
    from facterlab.facter import prompts

    words = [
        prompts.NEUTRAL_SYSTEM,
        prompts.FAIR_SYSTEM,
        "User demographics Gender Age Occupation Watch history",
        "Task Recommend Rank candidate movies JSON array titles",
        '["A", "B"]',
    ]
    return words + ds.items["title"].tolist()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """One tiny random checkpoint folder per family (config, safetensors weights, tokenizer, template)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    ds = make_world()
    base = Tokenizer(models.BPE(unk_token="<unk>"))
    base.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    base.decoder = decoders.ByteLevel()
    base.train_from_iterator(
        _corpus(ds),
        trainers.BpeTrainer(
            vocab_size=700,
            special_tokens=SPECIALS,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        ),
    )
    root = tmp_path_factory.mktemp("tiny-backbones")
    out = {}
    for i, (name, (cfg_cls, model_cls, extra, bos, eos, template)) in enumerate(FAMILIES.items()):
        tok = PreTrainedTokenizerFast(tokenizer_object=base, bos_token=bos, eos_token=eos, unk_token="<unk>")
        tok.chat_template = template
        cfg = getattr(transformers, cfg_cls)(
            vocab_size=len(tok),
            hidden_size=64,
            intermediate_size=128,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=4096,
            bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id,
            tie_word_embeddings=False,
            **extra,
        )
        torch.manual_seed(i)
        model = getattr(transformers, model_cls)(cfg)
        d = root / name
        model.save_pretrained(d)
        tok.save_pretrained(d)
        out[name] = d
    return ds, out


def _mcfg(path, **kw) -> ModelConfig:
    base = dict(llm=str(path), device="cpu", dtype="float32", max_new_tokens=8, batch_size=4)
    base.update(kw)
    return ModelConfig(**base)


def test_chat_templates_and_local_loading(checkpoints):
    from facterlab.models.llm import load_lm

    _, paths = checkpoints
    msgs = [{"role": "system", "content": "SYS"}, {"role": "user", "content": "USER"}]
    text = {}
    for name, d in paths.items():
        lm = load_lm(str(d), device="cpu", dtype="float32")
        assert lm.resolved.is_local and lm.fingerprint.startswith(f"{name}@")
        text[name] = lm.tokenizer.decode(lm.encode_messages(msgs))
        assert lm.tokenizer.convert_tokens_to_ids(FAMILIES[name][4]) in lm.eos_ids
    assert text["llama3"].startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nSYS<|eot_id|>")
    assert text["llama3"].endswith("<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert text["llama2"] == "<s>[INST] <<SYS>>\nSYS\n<</SYS>>\n\nUSER [/INST]"
    assert text["mistral"] == "<s>[INST] SYS\n\nUSER [/INST]"  # no system role: merged into the user turn


@pytest.mark.parametrize("name", list(FAMILIES))
def test_sampling_is_batch_independent(checkpoints, name):
    from facterlab.models.llm import DecodingParams, load_lm

    _, paths = checkpoints
    lm = load_lm(str(paths[name]), device="cpu", dtype="float32")
    prompts = [
        lm.encode_messages([{"role": "user", "content": f"Recommend {k} movies like Action Tale {k}"}])
        for k in range(4)
    ]
    params = DecodingParams(max_new_tokens=6)
    together = lm.generate(prompts, [11, 12, 13, 14], params, batch_size=4)
    alone = [lm.generate([p], [s], params, batch_size=4)[0] for p, s in zip(prompts, [11, 12, 13, 14])]
    assert together == alone


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_likelihood_shared_prompt_equals_full_forward(checkpoints, dtype, monkeypatch):
    import facterlab.models.llm as llm_mod

    _, paths = checkpoints
    if dtype == "bfloat16":  # bf16 matmuls exist on CPU; the package allows bf16 on CUDA only
        monkeypatch.setattr(llm_mod, "resolve_device", lambda device, dt: ("cpu", "bfloat16"))
    for name, d in paths.items():
        lm = llm_mod.CausalLM(llm_mod.resolve_llm(str(d)), device="cpu", dtype=dtype)
        assert next(lm.model.parameters()).dtype == getattr(torch, dtype)
        prompt = lm.encode_messages([{"role": "user", "content": "Rank: Heat, Fargo, Alien"}])
        cands = [lm.candidate_ids(t) for t in ("Action Tale 3 (1983)", "Comedy Tale 1 (1981)", "Romance Tale 7 (1987)")]
        packed = [s for s, _ in lm.score_candidates(prompt, cands, chunk=2)]
        full = [lm.score_full(prompt, c) for c in cands]
        tol = 1e-4 if dtype == "float32" else 0.15  # bf16: 8-bit mantissa, different op order
        assert np.allclose(packed, full, atol=tol, rtol=0), (name, packed, full)
        if dtype == "bfloat16":
            lm.generate([prompt], [1], llm_mod.DecodingParams(max_new_tokens=3), batch_size=2)
        llm_mod._WEIGHTS.clear()


@pytest.mark.parametrize(
    "name,protocol,ranker",
    [("llama3", "open", "generate"), ("llama2", "rank", "generate"), ("mistral", "rank", "likelihood")],
)
def test_run_experiment_on_tiny_backbones(checkpoints, tmp_path, name, protocol, ranker):
    """The paper profile's pipeline (protocol and ranker per backbone, rotated to keep CI fast)."""
    from facterlab.facter.pipeline import run_experiment
    from facterlab.models import make_recommender
    from facterlab.models.fake import HashEncoder

    ds, paths = checkpoints
    cfg = preset(
        "repro",  # the method settings the paper profile runs (params.PROFILES["paper"]["overrides"]["PRESET"])
        data__dataset="synthetic",
        data__n_rows=16,
        data__n_candidates=12,
        protocol=protocol,
        facter__passes=2,
        facter__tau_rho=0.8,
        metrics__cfr_rows=4,
        metrics__snsr_min_group=2,
        model__llm=str(paths[name]),
        model__device="cpu",
        model__dtype="float32",
        model__ranker=ranker,
        model__max_new_tokens=8,
        model__batch_size=4,
    )
    rec = make_recommender(cfg.model, protocol, cache=False)
    res = run_experiment(cfg, recommender=rec, encoder=HashEncoder(), dataset=ds, out_dir=tmp_path, progress=False)
    m = res.record.metrics
    assert m.preset == "repro" and m.variants["tie_order"] == "file_order"
    assert m.variants["ranker"] == (ranker if protocol == "rank" else None)
    assert set(m.methods) == {"neutral", "fair", "facter"}
    rows = res.rows["facter"]
    assert len(rows) == 2 * m.n_test and rows["pass"].max() == 2
    if protocol == "rank":  # every answer is a full permutation of the row's candidates (12 here, 40 in the paper)
        test = res.rows["neutral"]
        assert all(
            sorted(ids) == sorted(c)
            for ids, c in zip(test["mapped_ids"], test.merge(_candidates(res), on="row_id")["candidates"])
        )
        assert m.methods["neutral"].valid == 1.0
    else:
        assert 0.0 <= m.methods["neutral"].valid <= 1.0
    assert (res.out_dir / "metrics.json").is_file()


def _candidates(res):
    import pandas as pd

    from facterlab.data.protocol import build_interactions

    cfg = preset("repro", data__dataset="synthetic", data__n_rows=16, data__n_candidates=12)
    rows = build_interactions(make_world(), cfg.data).rows
    return pd.DataFrame({"row_id": rows["row_id"], "candidates": rows["candidates"]})
