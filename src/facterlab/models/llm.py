"""A causal LM with batch-independent sampling and shared-prefix likelihood scoring (docs/FACTER.md §5).

Generation (REPRO decoding: temperature 0.7, top-p 0.95, repetition penalty 1.2, 250 new tokens)
runs our own decode loop over the KV cache so that the output for ``(messages, seed)`` does not
depend on the batch it runs in:

* every prompt is left-padded to its own *bucket length* ``L = (n // bucket + 1) * bucket`` (at least
  one pad, so the attention mask is never trivially all-ones and the same attention path is taken
  alone and in a batch); only prompts of one bucket are batched together;
* positions are ``cumsum(mask) - 1``, so a row's real tokens get positions ``0..n-1`` whatever the pad;
* each row samples from its own ``torch.Generator`` seeded by the request seed; finished rows keep
  feeding a pad token (their outputs are ignored) so the batch shape never changes mid-decode;
* matmuls have ``M = rows`` (decode) or ``rows * L`` (prefill) and a BLAS may pick another kernel for
  another ``M`` (GEMV for ``M = 1``, split-K GEMMs on GPUs), so batches get dummy rows up to
  ``min_decode_rows`` (default 2), and with ``pad_full_batches`` (default on) every batch is padded
  to ``batch_size`` rows so that each row sees exactly the same shapes alone or in company.
  Measured on CPU float32 (MKL) with SmolLM2: with a fixed row count, a row's logits are bit-identical
  whatever its position and its companions; across row counts (1 vs 2 vs 9) prefill logits differ by
  ~1e-5, and the pad length (L=128 vs 256) changes nothing.  Token ids were identical alone / in
  batches of 3 and 8, shuffled, greedy and sampled, in every run we made (see the tests).

Two opt-in switches (each in the recommender's fingerprint, docs/CPU_DECODING.md):

* ``linear_kernel="onednn"`` (CPU, float32): every ``nn.Linear`` runs oneDNN's GEMM on weights packed
  once (``torch.ops.mkldnn``) instead of the BLAS (MKL).  Measured on the 2-core AMD EPYC: 1.4-3x
  faster decode GEMMs (the 49152-wide output head most), and a row's result does not depend on how
  many rows share the GEMM (MKL's does for 1-11 rows), so rows need no dummy companions and finished
  rows are dropped from the batch;
* ``stop_k`` (``model.stop_at_answer``): a row stops as soon as its answer is final
  (:func:`facterlab.models.parsing.answer_complete`: the text's first JSON array is closed and gives
  titles, so no continuation can change the parse); its raw text then ends there.

Sampling step for one row, with logits ``z`` over the vocabulary and previous tokens ``P``:
``z_t <- z_t * r if z_t < 0 else z_t / r`` for ``t in P`` (repetition penalty ``r``), ``z <- z / T``,
keep the smallest set of top tokens whose probability mass reaches ``top_p``, sample
``x ~ softmax(z)``; greedy ``argmax z`` when ``T == 0``.

Likelihood scoring of candidates ``c = (c_1..c_m)`` given prompt ``x``:
``log p(c | x) = sum_j log softmax(f(x, c_<j))[c_j]``; the prompt's KV cache is computed once and all
candidates are packed into one row after it, each seeing the prompt and its own earlier tokens only
(a 4-D attention mask); the vocabulary log-softmax is taken only at candidate positions.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from facterlab.config import LINEAR_KERNELS
from facterlab.models.device import resolve_device, torch_dtype
from facterlab.models.gguf_cache import converted_dir, is_complete, one_parse, save_converted
from facterlab.models.registry import ResolvedModel, _cached_revision, hub_fingerprint, resolve_llm
from facterlab.progress import loading

log = logging.getLogger(__name__)

__all__ = ["CausalLM", "DecodingParams", "load_lm", "bucket_length", "merge_system_into_user", "LINEAR_KERNELS"]


@dataclass(frozen=True)
class DecodingParams:
    """Decoding settings (docs/FACTER.md §5); ``temperature == 0`` means greedy."""

    temperature: float = 0.7
    top_p: float = 0.95
    max_new_tokens: int = 250
    repetition_penalty: float = 1.2

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.repetition_penalty <= 0:
            raise ValueError(f"repetition_penalty must be > 0, got {self.repetition_penalty}")


def bucket_length(n: int, bucket: int) -> int:
    """Padded length of an ``n``-token prompt: ``(n // bucket + 1) * bucket`` (always >= 1 pad).

    >>> bucket_length(10, 32), bucket_length(32, 32), bucket_length(33, 32)
    (32, 64, 64)
    """
    if bucket < 1:
        raise ValueError(f"bucket must be >= 1, got {bucket}")
    return (n // bucket + 1) * bucket


def effective_kernel(linear_kernel: str, device: str, dtype_name: str) -> str:
    """The kernel a model on ``device`` in ``dtype_name`` really uses: oneDNN only on CPU in float32.

    >>> effective_kernel("onednn", "cpu", "float32"), effective_kernel("onednn", "cuda", "bfloat16")
    ('onednn', 'blas')
    """
    if linear_kernel not in LINEAR_KERNELS:
        raise ValueError(f"linear_kernel {linear_kernel!r}: choose one of {LINEAR_KERNELS}")
    if linear_kernel == "onednn" and (device != "cpu" or dtype_name != "float32"):
        return "blas"
    return linear_kernel


def lm_fingerprint(resolved: ResolvedModel, dtype_name: str, kernel: str = "blas") -> str:
    """The model files' fingerprint, the compute dtype and (when not the default) the linear kernel."""
    return f"{resolved.fingerprint}|{dtype_name}" + ("" if kernel == "blas" else f"|{kernel}")


#: set while a CausalLM with ``linear_kernel="onednn"`` runs its model (the weights are shared by every
#: wrapper of the same model, so the choice is per call, not per module)
_ONEDNN: contextvars.ContextVar = contextvars.ContextVar("facterlab_onednn", default=False)


@contextlib.contextmanager
def _set(var: contextvars.ContextVar, value):
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def _install_onednn(model) -> None:
    """Give every ``nn.Linear`` of ``model`` a oneDNN-packed copy of its weight and a forward that uses
    it while :data:`_ONEDNN` is set (else the layer's own forward).  Idempotent."""
    import torch

    op = getattr(getattr(torch.ops, "mkldnn", None), "_linear_pointwise", None)
    if op is None or not torch.backends.mkldnn.is_available():
        raise RuntimeError("linear_kernel='onednn' needs a torch build with oneDNN (mkldnn); use 'blas'")
    for mod in model.modules():
        if not isinstance(mod, torch.nn.Linear) or hasattr(mod, "_facterlab_packed"):
            continue
        with torch.no_grad():
            mod._facterlab_packed = torch.ops.mkldnn._reorder_linear_weight(mod.weight.detach(), None)

        def forward(x, mod=mod, own=mod.forward):
            if _ONEDNN.get():
                return torch.ops.mkldnn._linear_pointwise(x, mod._facterlab_packed, mod.bias, "none", [], "")
            return own(x)

        mod.forward = forward  # type: ignore[method-assign]


def merge_system_into_user(messages: Sequence[dict]) -> list:
    """Fold system turns into the first user turn (for chat templates without a system role).

    >>> merge_system_into_user([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    [{'role': 'user', 'content': 'S\\n\\nU'}]
    """
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system" and m["content"])
    rest = [dict(m) for m in messages if m["role"] != "system"]
    if system:
        for m in rest:
            if m["role"] == "user":
                m["content"] = system + "\n\n" + m["content"]
                break
        else:
            rest.insert(0, {"role": "user", "content": system})
    return rest


class CausalLM:
    """A loaded tokenizer + causal LM (transformers), with the decode loop and scorers above."""

    def __init__(
        self,
        resolved: ResolvedModel,
        device: str = "auto",
        dtype: str = "auto",
        trust_remote_code: bool = False,
        bucket: int = 32,
        min_decode_rows: int = 2,
        pad_full_batches: bool | None = None,
        linear_kernel: str = "blas",
    ):
        import torch

        self.resolved = resolved
        self.device, self.dtype_name = resolve_device(device, dtype)
        self.bucket = int(bucket)
        self.min_decode_rows = int(min_decode_rows)
        self.pad_full_batches = True if pad_full_batches is None else bool(pad_full_batches)
        self.kernel = effective_kernel(linear_kernel, self.device, self.dtype_name)
        self.tokenizer, self.model = _load_weights(resolved, self.device, self.dtype_name, bool(trust_remote_code))
        if self.kernel == "onednn":
            _install_onednn(self.model)
        if not resolved.is_local:  # now downloaded: the commit actually loaded (registry.hub_fingerprint)
            resolved = _resolved_after_download(resolved)
            self.resolved = resolved
        import inspect

        params = inspect.signature(self.model.forward).parameters
        self._cache_kw = "cache" if "cache" in params else "past_key_values"
        tok = self.tokenizer
        eos = set()
        for v in (tok.eos_token_id, getattr(self.model.generation_config, "eos_token_id", None)):
            if isinstance(v, int):
                eos.add(v)
            elif isinstance(v, (list, tuple)):
                eos.update(int(x) for x in v)
        for name in ("<|eot_id|>", "<|im_end|>", "<|end_of_text|>"):
            tid = tok.convert_tokens_to_ids(name) if name in tok.get_vocab() else None
            if isinstance(tid, int):
                eos.add(tid)
        if not eos:
            raise ValueError(f"model {resolved.name!r} defines no end-of-sequence token")
        self.eos_ids = frozenset(eos)
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else min(eos)
        self.context_window = int(getattr(self.model.config, "max_position_embeddings", 0) or 4096)
        self.fingerprint = lm_fingerprint(resolved, self.dtype_name, self.kernel)
        self._torch = torch
        self._pieces: dict = {}

    @property
    def row_invariant(self) -> bool:
        """Whether a row's logits do not depend on how many rows share its forward pass (oneDNN's
        GEMMs; tested by tests/models/test_models_llm.py): then batches need no dummy rows and finished rows
        leave the batch."""
        return self.kernel == "onednn"

    def _kernel(self):
        """Context in which this wrapper's model runs (its linear kernel)."""
        if self.kernel == "onednn":
            return _set(_ONEDNN, True)
        return contextlib.nullcontext()

    # ---------------------------------------------------------------- prompts
    def encode_messages(self, messages: Sequence[dict]) -> list:
        """Token ids of ``messages`` under the chat template, ending with the assistant turn start.

        A template that rejects the system role (raises) is retried with the system text merged into
        the first user turn (:func:`merge_system_into_user`).
        """
        messages = [dict(m) for m in messages]
        try:
            text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        except Exception:  # noqa: BLE001 - jinja TemplateError / ValueError differ across tokenizers
            if not any(m["role"] == "system" for m in messages):
                raise
            text = self.tokenizer.apply_chat_template(
                merge_system_into_user(messages), tokenize=False, add_generation_prompt=True
            )
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    # ---------------------------------------------------------------- generation
    def _forward(self, **kw):
        with self._torch.inference_mode(), self._kernel():
            return self.model(**kw)

    def _has_bracket(self, token_id: int) -> bool:
        """Whether token ``token_id`` decodes to text containing ``]`` (memoised per token)."""
        hit = self._pieces.get(token_id)
        if hit is None:
            hit = self._pieces[token_id] = "]" in self.tokenizer.decode([token_id], skip_special_tokens=True)
        return hit

    def _sample_row(self, logits, prev_ids, params: DecodingParams, gen) -> int:
        torch = self._torch
        z = logits.float().clone()
        if params.repetition_penalty != 1.0 and prev_ids.numel():
            idx = torch.unique(prev_ids)
            s = z.gather(0, idx)
            s = torch.where(s < 0, s * params.repetition_penalty, s / params.repetition_penalty)
            z.scatter_(0, idx, s)
        if params.temperature == 0:
            return int(torch.argmax(z))
        z = z / params.temperature
        if params.top_p < 1.0:
            sz, si = torch.sort(z, descending=False)
            cum = torch.softmax(sz, dim=-1).cumsum(-1)
            drop = cum <= (1 - params.top_p)
            drop[-1] = False
            z = z.scatter(0, si, sz.masked_fill(drop, float("-inf")))
        probs = torch.softmax(z, dim=-1)
        return int(torch.multinomial(probs, 1, generator=gen))

    def generate_ids(
        self,
        prompts: Sequence[Sequence[int]],
        seeds: Sequence[int],
        params: DecodingParams,
        min_rows: int = 1,
        stop_k: Sequence[int] | None = None,
    ) -> list:
        """Generate for prompts of ONE bucket; returns the new token ids per row (EOS excluded).

        All rows are left-padded to the same bucket length; raises if the rows' buckets differ.
        ``stop_k`` (one ``k`` per prompt, or None): a row also stops at the token that makes its
        answer final (:func:`~facterlab.models.parsing.answer_complete` with that ``k``), that token
        included.  With a row-invariant kernel (:attr:`row_invariant`) there are no dummy rows
        (``min_rows`` is ignored) and finished rows leave the batch.
        """
        torch = self._torch
        if not prompts:
            return []
        if stop_k is not None and len(stop_k) != len(prompts):
            raise ValueError(f"stop_k has {len(stop_k)} entries for {len(prompts)} prompts")
        lengths = {bucket_length(len(p), self.bucket) for p in prompts}
        if len(lengths) != 1:
            raise ValueError("generate_ids batches prompts of one bucket only; use generate()")
        L = lengths.pop()
        n_real = len(prompts)
        compact = self.row_invariant
        n_rows = n_real if compact else max(self.min_decode_rows, int(min_rows))
        rows = list(prompts) + [prompts[-1]] * max(0, n_rows - n_real)  # dummy rows
        b = len(rows)
        ids = torch.full((b, L), self.pad_id, dtype=torch.long)
        mask = torch.zeros((b, L), dtype=torch.long)
        for i, p in enumerate(rows):
            ids[i, L - len(p) :] = torch.tensor(list(p), dtype=torch.long)
            mask[i, L - len(p) :] = 1
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        dev = self.device
        ids, mask, pos = ids.to(dev), mask.to(dev), pos.to(dev)
        gens = [torch.Generator(device=dev).manual_seed(int(s) & 0x7FFF_FFFF_FFFF_FFFF) for s in seeds]
        prev = [torch.tensor(list(p), dtype=torch.long, device=dev) for p in prompts]
        out: list = [[] for _ in range(n_real)]
        done = [False] * n_real
        live = list(range(b))  # request index of each batch row (>= n_real: a dummy row)
        if stop_k is not None:
            from facterlab.models.parsing import answer_complete
        from transformers import DynamicCache

        cache = DynamicCache(config=self.model.config)
        res = self._forward(
            input_ids=ids,
            attention_mask=mask,
            position_ids=pos,
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_kw: cache},
        )
        last_pos = pos[:, -1:]
        for step in range(params.max_new_tokens):
            logits = res.logits[:, -1, :]
            nxt = [self.pad_id] * len(live)
            for j, i in enumerate(live):
                if i >= n_real or done[i]:
                    continue
                t = self._sample_row(logits[j], prev[i], params, gens[i])
                if t in self.eos_ids:
                    done[i] = True
                    continue
                out[i].append(t)
                prev[i] = torch.cat([prev[i], torch.tensor([t], device=dev)])
                nxt[j] = t
                if stop_k is not None and self._has_bracket(t):
                    text = self.tokenizer.decode(out[i], skip_special_tokens=True)
                    done[i] = answer_complete(text, int(stop_k[i]))
            if all(done) or step == params.max_new_tokens - 1:
                break
            if compact and any(i < n_real and done[i] for i in live):
                keep = [j for j, i in enumerate(live) if not done[i]]
                sel = torch.tensor(keep, dtype=torch.long, device=dev)
                cache.batch_select_indices(sel)
                mask, last_pos = mask[sel], last_pos[sel]
                live, nxt = [live[j] for j in keep], [nxt[j] for j in keep]
            mask = torch.cat([mask, torch.ones((len(live), 1), dtype=mask.dtype, device=dev)], dim=1)
            last_pos = last_pos + 1
            res = self._forward(
                input_ids=torch.tensor(nxt, device=dev).view(len(live), 1),
                attention_mask=mask,
                position_ids=last_pos,
                use_cache=True,
                logits_to_keep=1,
                **{self._cache_kw: cache},
            )
        return out

    def plan(self, lengths: Sequence[int], batch_size: int) -> list:
        """Index batches: group by bucket (first-seen order), then chunks of ``batch_size``."""
        groups: dict = {}
        for i, n in enumerate(lengths):
            groups.setdefault(bucket_length(n, self.bucket), []).append(i)
        return [g[j : j + batch_size] for g in groups.values() for j in range(0, len(g), batch_size)]

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        seeds: Sequence[int],
        params: DecodingParams,
        batch_size: int = 8,
        stop_k: Sequence[int] | None = None,
    ) -> list:
        """Generate text for any prompts: bucketed, batched; returns decoded strings in input order.

        ``stop_k``: per prompt, the ``k`` of its answer: its row stops once that answer is final
        (:meth:`generate_ids`); None runs every row to EOS or ``max_new_tokens``.
        """
        if stop_k is not None and len(stop_k) != len(prompts):
            raise ValueError(f"stop_k has {len(stop_k)} entries for {len(prompts)} prompts")
        texts: list = [None] * len(prompts)
        for b in self.plan([len(p) for p in prompts], batch_size):
            new = self.generate_ids(
                [prompts[i] for i in b],
                [seeds[i] for i in b],
                params,
                min_rows=batch_size if self.pad_full_batches else 1,
                stop_k=None if stop_k is None else [stop_k[i] for i in b],
            )
            for i, t in zip(b, new):
                texts[i] = self.tokenizer.decode(t, skip_special_tokens=True)
        return texts

    # ---------------------------------------------------------------- likelihood
    def candidate_ids(self, text: str) -> list:
        """The token ids of a candidate's text, without special tokens (the likelihood ranker's candidate).

        Parameters
        ----------
        text : str
            The candidate's title.

        Returns
        -------
        list of int
            Its token ids.
        """
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def score_candidates(self, prompt_ids: Sequence[int], candidates: Sequence[Sequence[int]], chunk: int = 40) -> list:
        """Summed log-probabilities ``log p(c | prompt)`` of token sequences, sharing the prompt cache.

        Returns a list of ``(sum_logprob, n_tokens)``.  The prompt is run once (one row).  Then up to
        ``chunk`` candidates are *packed* into one row after it: candidate ``i``'s tokens but its last
        get positions ``P .. P + m_i - 2`` and a 4-D attention mask lets each of them see the prompt and
        the earlier tokens of its own candidate only, so one forward pass gives every
        ``log p(c_j | x, c_<j)`` without copying the prompt's KV cache per candidate (the cost is
        ``sum(m_i)`` query tokens against ``P + sum(m_i)`` keys).
        """
        torch = self._torch
        if any(len(c) == 0 for c in candidates):
            raise ValueError("a candidate tokenised to zero tokens; cannot score an empty title")
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        from transformers import DynamicCache

        dev = self.device
        P = len(prompt_ids)
        cache = DynamicCache(config=self.model.config)
        with torch.inference_mode():
            res = self._forward(
                input_ids=torch.tensor([list(prompt_ids)], device=dev),
                use_cache=True,
                logits_to_keep=1,
                **{self._cache_kw: cache},
            )
        lp0 = torch.log_softmax(res.logits[0, -1].float(), dim=-1)
        base = self.model.base_model
        head = self.model.get_output_embeddings()
        dtype = next(self.model.parameters()).dtype
        out: list[tuple[float, int]] = []
        for s in range(0, len(candidates), chunk):
            cands = [list(c) for c in candidates[s : s + chunk]]
            heads = [float(lp0[c[0]]) for c in cands]
            segs = [c[:-1] for c in cands]  # a candidate's last token is only ever a target
            T = sum(len(x) for x in segs)
            if T == 0:
                out.extend((h, len(c)) for h, c in zip(heads, cands))
                continue
            seg = torch.tensor([i for i, x in enumerate(segs) for _ in x])
            within = torch.tensor([j for x in segs for j in range(len(x))])
            allowed = (seg[:, None] == seg[None, :]) & (within[None, :] <= within[:, None])
            mask = torch.zeros((1, 1, T, P + T), dtype=dtype)
            mask[0, 0, :, P:].masked_fill_(~allowed, torch.finfo(dtype).min)
            ids = torch.tensor([[t for x in segs for t in x]])
            targets = torch.tensor([t for c in cands for t in c[1:]])
            c_cache = copy.deepcopy(cache) if s + chunk < len(candidates) else cache
            with torch.inference_mode(), self._kernel():
                h = base(
                    input_ids=ids.to(dev),
                    attention_mask=mask.to(dev),
                    position_ids=(P + within).view(1, T).to(dev),
                    use_cache=True,
                    **{self._cache_kw: c_cache},
                ).last_hidden_state[0]
                lp = torch.log_softmax(head(h).float(), dim=-1)
                tok = lp.gather(1, targets.to(dev).view(-1, 1))[:, 0].double().cpu()
            sums = torch.zeros(len(cands), dtype=torch.float64).index_add_(0, seg, tok)
            out.extend((h0 + float(x), len(c)) for h0, x, c in zip(heads, sums.tolist(), cands))
            del c_cache, h, lp
        return out

    def score_full(self, prompt_ids: Sequence[int], cand: Sequence[int]) -> float:
        """Reference scorer: one full forward pass over ``prompt + cand`` (no sharing)."""
        torch = self._torch
        P = len(prompt_ids)
        ids = torch.tensor([list(prompt_ids) + list(cand)], device=self.device)
        with torch.inference_mode(), self._kernel():
            logits = self.model(input_ids=ids, use_cache=False).logits[0, P - 1 : P + len(cand) - 1].float()
            lp = torch.log_softmax(logits, dim=-1)
            return float(lp.gather(1, torch.tensor(list(cand), device=self.device).view(-1, 1)).sum())


#: loaded (tokenizer, model) pairs: one per model identity, device, dtype and trust_remote_code
_WEIGHTS: dict = {}


def _weights_key(resolved: ResolvedModel, device: str, dtype_name: str, trust_remote_code: bool) -> tuple:
    """A local model is its files' content (same content, one copy); a hub model is its id (its
    fingerprint changes from "asked of the hub" to "read from the cache" on download, and must not
    make a second copy of an 8B model in the same process)."""
    ident = resolved.fingerprint if resolved.is_local else f"hub:{resolved.source}"
    return ident, resolved.source, resolved.gguf_file, device, dtype_name, bool(trust_remote_code)


def _load_weights(resolved: ResolvedModel, device: str, dtype_name: str, trust_remote_code: bool) -> tuple:
    """``(tokenizer, model)`` of ``resolved`` on ``device`` in ``dtype_name``, loaded once per process."""
    key = _weights_key(resolved, device, dtype_name, trust_remote_code)
    if key in _WEIGHTS:
        return _WEIGHTS[key]
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    kw: dict[str, bool | str] = {"trust_remote_code": bool(trust_remote_code)}
    if resolved.is_local:
        kw["local_files_only"] = True
    # a GGUF model is converted once and read back from the cache (facterlab.models.gguf_cache)
    converted = converted_dir(resolved.name, resolved.fingerprint, dtype_name) if resolved.gguf_file else None
    source = resolved.source
    if is_complete(converted):
        source, kw["local_files_only"] = str(converted), True
    elif resolved.gguf_file:
        kw["gguf_file"] = resolved.gguf_file
    with (
        loading(
            f"LLM {resolved.name}" + (" (converted GGUF from the cache)" if source != resolved.source else ""), log
        ),
        one_parse() if "gguf_file" in kw else contextlib.nullcontext(),  # the GGUF's metadata parsed once, not 3 times
    ):
        tokenizer = AutoTokenizer.from_pretrained(source, **kw)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype(dtype_name), **kw)
    if converted is not None and source == resolved.source:
        save_converted(converted, tokenizer, model)
    # transformers wraps PreTrainedModel.to with functools.wraps, which mypy cannot bind to the instance
    model.to(device).eval()  # type: ignore[arg-type]
    with torch.no_grad():  # fresh contiguous storage: dequantised GGUF tensors make slow GEMMs
        for prm in model.parameters():
            prm.data = prm.data.clone(memory_format=torch.contiguous_format)
    _WEIGHTS[key] = (tokenizer, model)
    return _WEIGHTS[key]


def _resolved_after_download(resolved: ResolvedModel) -> ResolvedModel:
    """A hub model re-resolved from the local cache (its commit), keeping the first answer if the cache
    cannot be read."""
    from dataclasses import replace as _replace

    rev = _cached_revision(resolved.source)
    return _replace(resolved, fingerprint=hub_fingerprint(resolved.source, rev)) if rev else resolved


@functools.lru_cache(maxsize=16)
def _load_lm_cached(
    key: tuple,
    resolved: ResolvedModel,
    device: str,
    dtype: str,
    trust_remote_code: bool,
    bucket: int,
    min_decode_rows: int,
    pad_full_batches: bool | None,
    linear_kernel: str = "blas",
) -> CausalLM:
    return CausalLM(
        resolved, device, dtype, trust_remote_code, bucket, min_decode_rows, pad_full_batches, linear_kernel
    )


def load_lm(
    name: str = "smollm2-135m",
    device: str = "auto",
    dtype: str = "auto",
    trust_remote_code: bool = False,
    bucket: int = 32,
    min_decode_rows: int = 2,
    pad_full_batches: bool | None = None,
    linear_kernel: str = "blas",
) -> CausalLM:
    """Load (once per process) the LLM ``name``: a registry name, local path, ``.gguf`` or hub id.

    The weights are loaded once per model identity (a local model's content fingerprint, a hub
    model's id), device and dtype, whatever the other arguments and whether the hub model was
    downloaded by this call or earlier.

    Unknown names fail fast, before torch/transformers are imported (see
    :mod:`facterlab.models.registry`).
    """
    if linear_kernel not in LINEAR_KERNELS:
        raise ValueError(f"linear_kernel {linear_kernel!r}: choose one of {LINEAR_KERNELS}")
    resolved = resolve_llm(name)
    dev, dt = resolve_device(device, dtype)
    key = _weights_key(resolved, dev, dt, bool(trust_remote_code))
    return _load_lm_cached(
        key,
        resolved if resolved.is_local else _hub_first(key, resolved),
        dev,
        dt,
        bool(trust_remote_code),
        int(bucket),
        int(min_decode_rows),
        pad_full_batches,
        linear_kernel,
    )


_HUB_FIRST: dict = {}


def _hub_first(key: tuple, resolved: ResolvedModel) -> ResolvedModel:
    """The first resolution of a hub model in this process (so the memo above hits on later calls)."""
    return _HUB_FIRST.setdefault(key, resolved)
