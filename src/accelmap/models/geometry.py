"""The model's weights, spelled out once: every tensor of every layer group, with its shape, its
copies and how it splits over tensor and expert parallelism.

Parameter counts (:mod:`accelmap.models.params`), FLOPs per token (:mod:`accelmap.models.flops`),
the operator graph (:mod:`accelmap.ops.graph`) and the memory budget all read this one geometry,
the whole model's or one rank's share (:meth:`Geometry.shard`).

Shapes follow the reference implementations' modules (Hugging Face ``transformers`` and the papers'
own descriptions), so that sums equal what ``model.num_parameters()`` prints for the published
checkpoints (e.g. Llama-2-7B = 6,738,415,616). Matrices are (input features, output features):

- attention (MHA/GQA/MQA): Wq d x (h*hd), Wk and Wv d x (kv*hd), Wo (h*hd) x d, optional biases
  (q, k, v widths; d), Qwen3's QK-norm: one RMSNorm weight over head_dim for q and for k;
- MLA (DeepSeek-V2 arXiv:2405.04434 sec. 2.1): W_DQ d x r_q, norm r_q, W_UQ r_q x h*(d_nope+d_rope)
  (or a full-rank Wq d x h*(d_nope+d_rope)), W_DKV+W_KR d x (r_kv + d_rope), norm r_kv,
  W_UK,W_UV r_kv x h*(d_nope+d_v), Wo h*d_v x d;
- FFN: plain up d x f and down f x d (+ f, d biases); gated (GLU variants, Shazeer 2020) adds a
  gate d x f (+ f);
- MoE layer: router d x E, optional per-expert routing bias (DeepSeek-V3
  ``e_score_correction_bias``), shared experts, optional shared-expert sigmoid gate d -> 1
  (Qwen-MoE), E routed experts (Shazeer 2017; Fedus 2021; DeepSeekMoE arXiv:2401.06066);
- norms: RMSNorm d (Zhang & Sennrich 2019), LayerNorm d + d bias (d without bias);
- embeddings V x d, learned positions (max_len + offset) x d, untied LM head d x V (+ V bias),
  final norm and BLOOM's embedding norm.

One rank's share (:meth:`Geometry.shard`):

- tensor parallelism (Megatron-LM, Shoeybi et al. 2019 sec. 3): Wq, Wk, Wv and the MLP's first
  matrices split by columns, Wo and the MLP's second matrix by rows, so each rank owns h/tp heads
  and f/tp of every MLP; embedding and LM head are vocabulary-parallel (ceil(V/tp) rows);
  norms and the biases added after a row-parallel matrix are replicated;
- GQA KV heads split while kv >= tp and are replicated beyond (one KV head per rank);
- MLA's latent down-projections (and their norms) are replicated, its up-projections and Wo
  split by heads;
- expert parallelism gives each rank E/ep whole routed experts; expert tensor parallelism
  ``etp`` splits each expert like an MLP: etp = tp in Megatron-Core training (expert parallelism
  carved out of data parallelism), tp/ep in vLLM serving (``--enable-expert-parallel`` splits
  the tensor-parallel group). Every rank still routes its tokens over all E experts, so a local
  expert's balanced load is ep*T*k/E = T*k/(E/ep): the share keeps top_k and its local expert
  count. The router's columns (and routing bias) are counted per local expert, E/ep per rank,
  as the first sharding code did (Megatron-Core replicates the d x E router: a small term).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import cached_property

from accelmap.models.schema import (
    FFNKind,
    LocalAttention,
    MLAConfig,
    ModelSpec,
    NormKind,
    PositionKind,
)


class Part(StrEnum):
    """Where a tensor sits, for the parameter breakdown."""

    ATTENTION = "attention"
    NORMS = "norms"  # the norms of a transformer block
    FFN = "ffn"  # dense MLP, or everything of a MoE layer's FFN (router, shared, experts)
    EMBEDDING = "embedding"  # token and learned position embeddings
    FINAL_NORMS = "final_norms"  # final norm and embedding norm
    LM_HEAD = "lm_head"


class Split(StrEnum):
    """How tensor parallelism cuts a tensor (Shoeybi et al. 2019 sec. 3)."""

    REPLICATED = "replicated"
    COLUMN = "column"  # output features over the ranks (ColumnParallelLinear), its bias too
    ROW = "row"  # input features over the ranks (RowParallelLinear)
    KV_HEADS = "kv_heads"  # by KV heads while kv >= tp, one KV head per rank beyond
    VOCAB = "vocab"  # vocabulary rows over the ranks, padded up (VocabParallelEmbedding)


class ExpertSplit(StrEnum):
    """How expert parallelism cuts a tensor."""

    NONE = "none"
    ROUTER = "router"  # one column (or bias entry) per routed expert: E/ep on each rank
    EXPERTS = "experts"  # copies are the routed experts: E/ep whole experts per rank, etp inside


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]  # matrices (input features, output features); vectors (n,)
    part: Part
    tp: Split = Split.REPLICATED
    ep: ExpertSplit = ExpertSplit.NONE
    copies: int = 1  # identical tensors (routed or shared experts, a block's norms)

    @property
    def is_matrix(self) -> bool:
        return len(self.shape) == 2

    @property
    def rows(self) -> int:
        return self.shape[0]

    @property
    def cols(self) -> int:
        return self.shape[-1]

    @property
    def size(self) -> int:
        """Elements of one copy."""
        return math.prod(self.shape)

    @property
    def params(self) -> int:
        return self.size * self.copies

    def active(self, top_k: int) -> int:
        """Parameters one token touches: top_k of the routed experts, everything else once (as
        Mixtral's "12.9B active" and DeepSeek-V3's "37B activated" count)."""
        return self.size * top_k if self.ep is ExpertSplit.EXPERTS else self.params


@dataclass(frozen=True)
class Group:
    """Consecutive layers with the same tensors (e.g. DeepSeek-V3's 3 dense then 58 MoE)."""

    first: int
    last: int
    moe: bool
    sliding: bool  # the layers attend within the sliding window
    tensors: tuple[Tensor, ...]

    @property
    def count(self) -> int:
        return self.last - self.first + 1

    @property
    def kind(self) -> str:
        return ("moe" if self.moe else "dense") + ("+sliding" if self.sliding else "")

    @property
    def matrices(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.tensors if t.is_matrix)

    @property
    def params_per_layer(self) -> int:
        return sum(t.params for t in self.tensors)

    def tensor(self, name: str) -> Tensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(f"no tensor {name!r} in layers {self.first}-{self.last}")


@dataclass(frozen=True)
class Geometry:
    """The whole model (``Geometry.of(spec)``) or one rank's share (``.shard(tp, ep, etp)``):
    the model's flags plus the dimensions a rank holds. Not a ModelSpec: a share is no model."""

    model: ModelSpec  # the whole model (architecture flags, layer pattern)
    n_layers: int  # layers held: all, or the first pipeline stage's (``first_layers``)
    heads: int  # query heads on this rank
    kv_heads: int  # K/V heads on this rank
    ffn: int  # dense FFN width on this rank
    vocab: int  # vocabulary rows of the embedding and LM head on this rank
    experts: int = 0  # routed experts on this rank (0: dense model)
    expert_ffn: int = 0  # width of one routed expert on this rank
    shared_ffn: int = 0  # width of one shared expert on this rank
    tp: int = 1
    ep: int = 1
    etp: int = 1

    @classmethod
    def of(cls, model: ModelSpec | Geometry) -> Geometry:
        """The whole model's geometry (a Geometry is returned as it is)."""
        if isinstance(model, Geometry):
            return model
        moe = model.moe
        return cls(model=model, n_layers=model.n_layers, heads=model.n_heads,
                   kv_heads=model.kv_heads, ffn=model.ffn_dim, vocab=model.vocab_size,
                   experts=moe.num_experts if moe else 0,
                   expert_ffn=moe.expert_ffn_dim if moe else 0,
                   shared_ffn=moe.shared_ffn if moe else 0)

    def shard(self, tp: int = 1, ep: int = 1, etp: int | None = None,
              attention_tp: int | None = None) -> Geometry:
        """One rank's share under tensor parallelism ``tp``, expert parallelism ``ep`` and
        expert tensor parallelism ``etp`` (default tp, Megatron-Core training; tp/ep for vLLM
        serving). Widths are floored at 1, vocabulary rows padded up (ceil(V/tp)).
        ``attention_tp`` (default tp) splits the attention heads alone: 1 under DP attention
        (``mapping.plan.Mapping.attention_tp``), where each rank holds the whole attention
        weights and every KV head while the FFN, experts and vocabulary stay split by tp."""
        if (self.tp, self.ep, self.etp) != (1, 1, 1):
            raise ValueError("shard the whole model's geometry, not a share of it")
        etp = tp if etp is None else etp
        atp = tp if attention_tp is None else attention_tp
        m = self.model
        heads = m.n_heads // atp
        moe = m.moe
        return replace(
            self, heads=heads,
            # MLA has no KV heads to split (the latent is replicated): n_kv_heads as given
            kv_heads=(m.n_kv_heads or heads) if m.mla else max(m.kv_heads // atp, 1),
            ffn=max(m.ffn_dim // tp, 1), vocab=math.ceil(m.vocab_size / tp),
            experts=max(moe.num_experts // ep, 1) if moe else 0,
            expert_ffn=max(moe.expert_ffn_dim // etp, 1) if moe else 0,
            shared_ffn=max(moe.shared_ffn // tp, 1) if moe else 0,
            tp=tp, ep=ep, etp=etp)

    def first_layers(self, n: int) -> Geometry:
        """The first ``n`` layers (a pipeline stage's share, charged as the first stage's)."""
        return replace(self, n_layers=n)

    def parts(self, t: Tensor, tp: int, ep: int = 1, etp: int | None = None) -> int:
        """Into how many distinct pieces ``shard(tp, ep, etp)`` cuts tensor ``t`` of this whole
        geometry: a rank's piece times this is the whole (up to vocabulary padding and floors)."""
        etp = tp if etp is None else etp
        degree = etp if t.ep is ExpertSplit.EXPERTS else tp
        cut = {Split.REPLICATED: 1, Split.COLUMN: degree, Split.ROW: degree,
               Split.VOCAB: degree, Split.KV_HEADS: min(degree, self.kv_heads)}[t.tp]
        return cut * (ep if t.ep is not ExpertSplit.NONE else 1)

    # --- flags and dimensions the operator graph and memory read -------------------------
    @property
    def d_model(self) -> int:
        return self.model.d_model

    @property
    def head_dim(self) -> int:
        return self.model.head_size

    @property
    def mla(self) -> MLAConfig | None:
        return self.model.mla

    @property
    def qk_head_dim(self) -> int:
        mla = self.mla
        return mla.qk_head_dim if mla else self.head_dim

    @property
    def v_head_dim(self) -> int:
        mla = self.mla
        return mla.v_head_dim if mla else self.head_dim

    @property
    def kv_width(self) -> int:
        """Values one token adds to one layer's KV cache on this rank: the latent plus the
        shared RoPE key under MLA (DeepSeek-V2 sec. 2.1.2-2.1.3), else K and V of each KV head."""
        mla = self.mla
        if mla is not None:
            dsa = self.model.dsa
            return mla.kv_lora_rank + mla.qk_rope_head_dim + (dsa.index_head_dim if dsa else 0)
        return 2 * self.kv_heads * self.head_dim

    @property
    def gated(self) -> bool:
        return self.model.ffn_kind is FFNKind.GATED

    @property
    def rope(self) -> bool:
        return self.model.position is PositionKind.ROPE

    @property
    def rope_fraction(self) -> float:
        return self.model.rope_fraction

    @property
    def sliding_window(self) -> int | None:
        return self.model.sliding_window

    @property
    def chunked(self) -> bool:
        """Local layers attend within fixed chunks (Llama 4), not a sliding window."""
        return self.model.local_attention is LocalAttention.CHUNKED

    @property
    def final_norm(self) -> bool:
        return self.model.final_norm

    @property
    def is_moe(self) -> bool:
        return self.model.moe is not None

    @property
    def top_k(self) -> int:
        return self.model.moe.top_k if self.model.moe else 0

    @property
    def total_experts(self) -> int:
        return self.model.moe.num_experts if self.model.moe else 0

    @property
    def shared_experts(self) -> int:
        return self.model.moe.num_shared_experts if self.model.moe else 0

    @property
    def n_moe_layers(self) -> int:
        return sum(g.count for g in self.groups if g.moe)

    def is_moe_layer(self, layer: int) -> bool:
        return self.model.is_moe_layer(layer)

    def is_sliding_layer(self, layer: int) -> bool:
        return self.model.is_sliding_layer(layer)

    @property
    def norm_params(self) -> int:
        """Parameters of one normalization over d_model."""
        return sum(t.params for t in self._norm("norm", self.d_model, Part.NORMS))

    # --- tensors ---------------------------------------------------------------------------
    @cached_property
    def groups(self) -> tuple[Group, ...]:
        out: list[Group] = []
        for i in range(self.n_layers):
            moe, sliding = self.is_moe_layer(i), self.is_sliding_layer(i)
            if out and (out[-1].moe, out[-1].sliding) == (moe, sliding):
                out[-1] = replace(out[-1], last=i)
            else:
                out.append(Group(i, i, moe, sliding, self._layer(moe)))
        return tuple(out)

    @cached_property
    def outer(self) -> tuple[Tensor, ...]:
        """Tensors outside the layers: embeddings, outer norms, LM head."""
        m, d, V = self.model, self.d_model, self.vocab
        out = [Tensor("embedding", (V, d), Part.EMBEDDING, Split.VOCAB)]
        if m.position is PositionKind.LEARNED:
            rows = m.max_seq_len + m.learned_position_offset
            out.append(Tensor("positions", (rows, d), Part.EMBEDDING))
        if m.embedding_norm:
            out += self._norm("embedding_norm", d, Part.FINAL_NORMS)
        if m.final_norm:
            out += self._norm("final_norm", d, Part.FINAL_NORMS)
        if not m.tied_embeddings:
            out.append(Tensor("lm_head", (d, V), Part.LM_HEAD, Split.VOCAB))
        if m.lm_head_bias:
            out.append(Tensor("lm_head_bias", (V,), Part.LM_HEAD, Split.VOCAB))
        return tuple(out)

    @cached_property
    def mtp(self) -> tuple[Tensor, ...]:
        """One multi-token-prediction module as DeepSeek-V3 stores it (arXiv:2412.19437 sec.
        2.2; checkpoint ``model.layers.61.*``, README_WEIGHTS.md): one more block shaped like the
        last layer, RMSNorms ``enorm`` and ``hnorm`` over d, the projection ``eh_proj`` 2d -> d,
        the ``shared_head`` norm, and stored copies of the embedding and output head, which the
        architecture shares with the main model (Part.EMBEDDING / Part.LM_HEAD tell them apart).
        Empty when the model has none."""
        m, d = self.model, self.d_model
        if not m.mtp_layers:
            return ()
        last = self.groups[-1]
        block = tuple(replace(t, copies=t.copies * m.mtp_layers) for t in last.tensors)
        k = m.mtp_layers
        return (*block,
                Tensor("mtp_norms", (d,), Part.NORMS, copies=3 * k),  # enorm, hnorm, head norm
                Tensor("mtp_eh_proj", (2 * d, d), Part.ATTENTION, copies=k),
                Tensor("mtp_embedding", (self.vocab, d), Part.EMBEDDING, Split.VOCAB, copies=k),
                Tensor("mtp_lm_head", (d, self.vocab), Part.LM_HEAD, Split.VOCAB, copies=k))

    def group_of(self, layer: int) -> Group:
        for g in self.groups:
            if g.first <= layer <= g.last:
                return g
        raise IndexError(f"layer {layer} outside 0-{self.n_layers - 1}")

    def _norm(self, name: str, dim: int, part: Part, copies: int = 1) -> list[Tensor]:
        out = [Tensor(name, (dim,), part, copies=copies)]
        if self.model.norm is NormKind.LAYERNORM and self.model.norm_bias:
            out.append(Tensor(f"{name}_bias", (dim,), part, copies=copies))
        return out

    def _layer(self, moe: bool) -> tuple[Tensor, ...]:
        norms = self._norm("norm", self.d_model, Part.NORMS, self.model.norms_per_layer)
        ffn = self._moe() if moe else self._ffn(self.ffn)
        return (*self._attention(), *norms, *ffn)

    def _attention(self) -> list[Tensor]:
        m, d, h, A = self.model, self.d_model, self.heads, Part.ATTENTION
        out: list[Tensor] = []
        if m.mla is not None:
            la = m.mla
            if la.q_lora_rank is None:
                out.append(Tensor("wq", (d, h * la.qk_head_dim), A, Split.COLUMN))
            else:
                r = la.q_lora_rank
                out += [Tensor("wq_a", (d, r), A), Tensor("q_a_norm", (r,), A),
                        Tensor("wq_b", (r, h * la.qk_head_dim), A, Split.COLUMN)]
            r = la.kv_lora_rank
            out += [Tensor("wkv_a", (d, r + la.qk_rope_head_dim), A),
                    Tensor("kv_a_norm", (r,), A),
                    Tensor("wkv_b", (r, h * (la.qk_nope_head_dim + la.v_head_dim)), A,
                           Split.COLUMN),
                    Tensor("wo", (h * la.v_head_dim, d), A, Split.ROW)]
            if m.dsa is not None and la.q_lora_rank is not None:
                # DeepSeek-V3.2-Exp inference/model.py, class Indexer: wq_b (q_lora_rank ->
                # heads x head_dim), wk (d -> head_dim), k_norm (LayerNorm: weight and bias),
                # weights_proj (d -> heads); plain Linear layers, replicated under TP
                ih, idim = m.dsa.index_n_heads, m.dsa.index_head_dim
                out += [Tensor("indexer_wq", (la.q_lora_rank, ih * idim), A),
                        Tensor("indexer_wk", (d, idim), A),
                        Tensor("indexer_k_norm", (idim,), A, copies=2),
                        Tensor("indexer_weights", (d, ih), A)]
        else:
            hd, kv = self.head_dim, self.kv_heads
            out += [Tensor("wq", (d, h * hd), A, Split.COLUMN),
                    Tensor("wk", (d, kv * hd), A, Split.KV_HEADS),
                    Tensor("wv", (d, kv * hd), A, Split.KV_HEADS),
                    Tensor("wo", (h * hd, d), A, Split.ROW)]
            if m.qkv_bias:
                out += [Tensor("bq", (h * hd,), A, Split.COLUMN),
                        Tensor("bk", (kv * hd,), A, Split.KV_HEADS),
                        Tensor("bv", (kv * hd,), A, Split.KV_HEADS)]
            if m.qk_norm:
                out += [Tensor("q_norm", (hd,), A), Tensor("k_norm", (hd,), A)]
        if m.attn_out_bias:
            out.append(Tensor("bo", (d,), A))
        if m.attention_sinks:  # gpt-oss: one learned logit per head ("sinks", split with heads)
            out.append(Tensor("sinks", (h,), A, Split.COLUMN))
        return out

    def _ffn(self, hidden: int, prefix: str = "", copies: int = 1,
             ep: ExpertSplit = ExpertSplit.NONE) -> list[Tensor]:
        d, F = self.d_model, Part.FFN
        names = ("gate", "up") if self.gated else ("up",)
        out = [Tensor(f"{prefix}{n}", (d, hidden), F, Split.COLUMN, ep, copies) for n in names]
        out.append(Tensor(f"{prefix}down", (hidden, d), F, Split.ROW, ep, copies))
        if self.model.mlp_bias:
            out += [Tensor(f"{prefix}{n}_bias", (hidden,), F, Split.COLUMN, ep, copies)
                    for n in names]
            out.append(Tensor(f"{prefix}down_bias", (d,), F, Split.REPLICATED, ep, copies))
        return out

    def _moe(self) -> list[Tensor]:
        moe, d, E, F = self.model.moe, self.d_model, self.experts, Part.FFN
        assert moe is not None
        out = [Tensor("router", (d, E), F, ep=ExpertSplit.ROUTER)]
        if moe.router_bias:
            out.append(Tensor("router_bias", (E,), F, ep=ExpertSplit.ROUTER))
        if moe.num_shared_experts:
            if moe.shared_expert_gate:
                out.append(Tensor("shared_expert_gate", (d,), F))
            out += self._ffn(self.shared_ffn, "shared_", moe.num_shared_experts)
        return out + self._ffn(self.expert_ffn, "expert_", E, ExpertSplit.EXPERTS)
