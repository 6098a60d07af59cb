#!/usr/bin/python3
"""Small plain-PyTorch versions of Hugging Face decoder-only language models, for
tools/record_finetune.py (ground truth for `gpumem finetune`).

No `transformers` and no `peft` here (Debian's torch 1.13, CPU only): the
modules below are written from scratch, but wherever a choice changes memory
(which tensors exist, their shapes, their dtypes, what autograd keeps) they do
what transformers' modeling code does in its 4.46 to 4.49 releases with
attn_implementation="eager", and what PEFT's LoRA layer does:

  Llama   (LlamaForCausalLM)
    - embed_tokens -> N x decoder layer -> norm -> lm_head;
    - 4D causal mask built once per forward in the model dtype:
      full((seq, seq + 1), finfo.min) -> triu(1) -> *= (arange > cache_position)
      -> [None, None].expand(batch, 1, seq, seq + 1) (a view: one seq x (seq+1)
      storage; transformers' target_length is seq + 1 without an attention mask);
    - rotary cos/sin computed once per forward in the model
      (LlamaRotaryEmbedding: inv_freq fp32 buffer, freqs = inv_freq @ positions
      in fp32, cat, cos/sin, "* attention_scaling" (1.0, still a copy), then
      .to(model dtype)); each attention applies q*cos + rotate_half(q)*sin;
    - RMSNorm: x.to(float32), pow(2).mean(-1, keepdim), x * rsqrt(var + eps),
      weight * x.to(input dtype);
    - eager attention: q/k/v projections, view + transpose, rotary, repeat_kv
      (expand + reshape when grouped), matmul(q, k^T) / sqrt(head_dim), + mask,
      softmax(dim=-1, dtype=float32).to(q dtype), dropout(attention_dropout),
      matmul(w, v), transpose(1, 2).contiguous(), reshape, o_proj;
    - MLP: down_proj(silu(gate_proj(x)) * up_proj(x));
    - residual adds as in LlamaDecoderLayer.
  Qwen2   Llama with bias=True on q_proj, k_proj, v_proj (o_proj has none);
          tie_word_embeddings as configured (Qwen2-0.5B/1.5B tie).
  Gemma-2 (Gemma2ForCausalLM)
    - embedding (padding_idx = pad_token_id) times
      torch.tensor(hidden_size ** 0.5, dtype=model dtype);
    - 4 RMSNorms per layer, Gemma's form: x.float() normalised, times
      (1 + weight.float()), .type_as(x); input_layernorm -> attention ->
      post_attention_layernorm -> + residual -> pre_feedforward_layernorm ->
      MLP -> post_feedforward_layernorm -> + residual;
    - layers with an even index are "sliding": they rebuild the mask,
      tril(ones_like(mask, bool), -sliding_window) and
      where(that, finfo.min, mask) (a batch x 1 x seq x seq tensor each);
    - rotary cos/sin computed in every attention (Gemma2RotaryEmbedding);
    - attention scale query_pre_attn_scalar ** -0.5, logit soft-capping
      w / cap -> tanh -> * cap (cap = attn_logit_softcapping = 50) before the
      mask, head_dim independent of hidden_size / heads;
    - MLP with gelu(approximate="tanh") (gelu_pytorch_tanh);
    - final logit soft-capping (logits / 30 -> tanh -> * 30), tied lm_head.
  Mixtral (MixtralForCausalLM) Llama attention and norms; the MLP is
    MixtralSparseMoeBlock: router gate (Linear hidden -> n_experts, no bias),
    softmax(dim=1, dtype=float), topk(top_k), routing_weights /= sum,
    .to(hidden dtype), final = zeros(tokens, hidden), one_hot(selected,
    n_experts).permute(2, 1, 0), then for every expert: idx, top_x =
    where(expert_mask[e]); state = hidden[None, top_x].reshape(-1, hidden);
    out = w2(silu(w1(state)) * w3(state)) * routing_weights[top_x, idx, None];
    final.index_add_(0, top_x, out.to(dtype)). No auxiliary router loss
    (output_router_logits=False, the config default).

  Loss (transformers' ForCausalLMLoss, 4.46 to 4.49; loss_style "shift"):
    logits.float() (a no-op in fp32), shift_logits = logits[..., :-1, :]
    .contiguous(), shift_labels = labels[..., 1:].contiguous(), cross_entropy
    (ignore_index=-100, mean). loss_style "pad" is 4.50 and later: labels
    padded with -100 and shifted, the logits used unshifted (no logits copy).

  LoRA (peft.tuners.lora.Linear): base_layer (frozen) + lora_A (Linear in -> r,
    no bias, kaiming_uniform_(a=sqrt(5))) + lora_B (Linear r -> out, no bias;
    PEFT zero-initialises it, here small random values so that gradients and
    updates are not trivially zero; memory is the same) + lora_dropout
    (nn.Identity when p == 0, else nn.Dropout(p)); forward:
        result = base_layer(x); dtype = result.dtype
        x = x.to(lora_A.weight.dtype)
        result = result + lora_B(lora_A(dropout(x))) * scaling     # scaling = alpha / r
        result = result.to(dtype)
    Adapters are fp32 even on a bf16 base (PEFT's autocast_adapter_dtype=True,
    its default), so on bf16 models x is copied to fp32 and the sum is fp32.
    Everything but lora_A / lora_B is frozen (PEFT's bias="none").

  Gradient checkpointing (PreTrainedModel.gradient_checkpointing_enable()
  with its default gradient_checkpointing_kwargs {"use_reentrant": True}):
    each decoder layer is called as torch.utils.checkpoint.checkpoint(
    layer.__call__, hidden_states, causal_mask, position_ids, None, False,
    False, cache_position, position_embeddings, use_reentrant=True) in
    training (transformers passes the same positional arguments).
    enable_input_require_grads() registers a forward hook on the input
    embedding that calls output.requires_grad_(True): PEFT does it when the
    model has gradient checkpointing enabled (and transformers does it in
    gradient_checkpointing_enable for PEFT-loaded models); without it a
    reentrant checkpoint whose input does not require grad gives its layer
    no gradients. tools/record_finetune.py applies it whenever checkpointing
    is on and the embedding is frozen (LoRA, and "freeze" on untied models).
"""
import math

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


# --------------------------------------------------------------------------
# Hugging Face style config.json dictionaries
# --------------------------------------------------------------------------

def hf_config(model_type, hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
              num_key_value_heads, vocab_size, head_dim=None, torch_dtype="float32", tie_word_embeddings=None,
              max_position_embeddings=2048, **extra):
    """A config.json dictionary as transformers writes it for `model_type` (keys that matter here)."""
    head_dim = head_dim or hidden_size // num_attention_heads
    arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "gemma2": "Gemma2ForCausalLM",
            "mixtral": "MixtralForCausalLM"}[model_type]
    cfg = {
        "architectures": [arch],
        "model_type": model_type,
        "hidden_size": hidden_size,
        "intermediate_size": intermediate_size,
        "num_hidden_layers": num_hidden_layers,
        "num_attention_heads": num_attention_heads,
        "num_key_value_heads": num_key_value_heads,
        "head_dim": head_dim,
        "vocab_size": vocab_size,
        "max_position_embeddings": max_position_embeddings,
        "torch_dtype": torch_dtype,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "use_cache": True,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "transformers_version": "4.46.3",
    }
    if model_type == "llama":
        cfg.update(hidden_act="silu", rms_norm_eps=1e-5, rope_theta=10000.0, rope_scaling=None,
                   attention_bias=False, mlp_bias=False, pretraining_tp=1,
                   tie_word_embeddings=False if tie_word_embeddings is None else tie_word_embeddings)
    elif model_type == "qwen2":
        cfg.update(hidden_act="silu", rms_norm_eps=1e-6, rope_theta=1000000.0, rope_scaling=None,
                   use_sliding_window=False, sliding_window=max_position_embeddings,
                   max_window_layers=num_hidden_layers, bos_token_id=None, eos_token_id=2,
                   tie_word_embeddings=False if tie_word_embeddings is None else tie_word_embeddings)
    elif model_type == "gemma2":
        cfg.update(hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6,
                   rope_theta=10000.0, attention_bias=False, query_pre_attn_scalar=head_dim,
                   attn_logit_softcapping=50.0, final_logit_softcapping=30.0, sliding_window=4096,
                   cache_implementation="hybrid", pad_token_id=0,
                   tie_word_embeddings=True if tie_word_embeddings is None else tie_word_embeddings)
    elif model_type == "mixtral":
        cfg.update(hidden_act="silu", rms_norm_eps=1e-5, rope_theta=1000000.0, sliding_window=None,
                   num_local_experts=4, num_experts_per_tok=2, output_router_logits=False,
                   router_aux_loss_coef=0.02, router_jitter_noise=0.0,
                   tie_word_embeddings=False if tie_word_embeddings is None else tie_word_embeddings)
    cfg.update(extra)
    return cfg


# --------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------

class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class Gemma2RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        out = self._norm(x.float())
        out = out * (1.0 + self.weight.float())  # Gemma: (x * w) then cast, Llama: w * x.to(dtype)
        return out.type_as(x)


class RotaryEmbedding(nn.Module):
    """LlamaRotaryEmbedding (default rope); gemma_style: Gemma2RotaryEmbedding (no attention_scaling step)."""

    def __init__(self, dim, base, gemma_style=False):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.attention_scaling = 1.0
        self.gemma_style = gemma_style

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        with torch.autocast(device_type="cpu", enabled=False):
            freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos = emb.cos()
            sin = emb.sin()
        if not self.gemma_style:
            cos = cos * self.attention_scaling
            sin = sin * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


def repeat_kv(hidden_states, n_rep):
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class Attention(nn.Module):
    """LlamaAttention / Qwen2Attention / MixtralAttention / Gemma2Attention, eager."""

    def __init__(self, cfg, layer_idx):
        super().__init__()
        self.gemma = cfg["model_type"] == "gemma2"
        self.num_heads = cfg["num_attention_heads"]
        self.num_key_value_heads = cfg["num_key_value_heads"]
        self.num_key_value_groups = self.num_heads // self.num_key_value_heads
        self.head_dim = cfg["head_dim"]
        self.attention_dropout = cfg.get("attention_dropout", 0.0)
        hidden = cfg["hidden_size"]
        qkv_bias = cfg["model_type"] == "qwen2" or cfg.get("attention_bias", False)
        o_bias = cfg.get("attention_bias", False)
        self.q_proj = nn.Linear(hidden, self.num_heads * self.head_dim, bias=qkv_bias)
        self.k_proj = nn.Linear(hidden, self.num_key_value_heads * self.head_dim, bias=qkv_bias)
        self.v_proj = nn.Linear(hidden, self.num_key_value_heads * self.head_dim, bias=qkv_bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, hidden, bias=o_bias)
        if self.gemma:
            self.scaling = cfg["query_pre_attn_scalar"] ** -0.5
            self.softcap = cfg.get("attn_logit_softcapping")
            self.rotary_emb = RotaryEmbedding(self.head_dim, cfg["rope_theta"], gemma_style=True)

    def forward(self, hidden_states, attention_mask, position_ids, position_embeddings):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states)
        key_states = self.k_proj(hidden_states)
        value_states = self.v_proj(hidden_states)
        query_states = query_states.view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        key_states = key_states.view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        value_states = value_states.view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        if self.gemma:
            cos, sin = self.rotary_emb(value_states, position_ids)
        else:
            cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        key_states = repeat_kv(key_states, self.num_key_value_groups)
        value_states = repeat_kv(value_states, self.num_key_value_groups)
        if self.gemma:
            attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
            if self.softcap is not None:
                attn_weights = attn_weights / self.softcap
                attn_weights = torch.tanh(attn_weights)
                attn_weights = attn_weights * self.softcap
        else:
            attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) / math.sqrt(self.head_dim)
        if attention_mask is not None:
            causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
            attn_weights = attn_weights + causal_mask
        attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        attn_weights = F.dropout(attn_weights, p=self.attention_dropout, training=self.training)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous()
        attn_output = attn_output.reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)


ACT = {"silu": F.silu, "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh")}


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(h, i, bias=False)
        self.up_proj = nn.Linear(h, i, bias=False)
        self.down_proj = nn.Linear(i, h, bias=False)
        self.act_fn = ACT[cfg["hidden_act"]]

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class ExpertMLP(nn.Module):
    """MixtralBlockSparseTop2MLP."""

    def __init__(self, cfg):
        super().__init__()
        h, i = cfg["hidden_size"], cfg["intermediate_size"]
        self.w1 = nn.Linear(h, i, bias=False)
        self.w2 = nn.Linear(i, h, bias=False)
        self.w3 = nn.Linear(h, i, bias=False)

    def forward(self, hidden_states):
        current = F.silu(self.w1(hidden_states)) * self.w3(hidden_states)
        return self.w2(current)


class SparseMoeBlock(nn.Module):
    """MixtralSparseMoeBlock (training, router_jitter_noise 0)."""

    def __init__(self, cfg):
        super().__init__()
        self.hidden_dim = cfg["hidden_size"]
        self.num_experts = cfg["num_local_experts"]
        self.top_k = cfg["num_experts_per_tok"]
        self.gate = nn.Linear(self.hidden_dim, self.num_experts, bias=False)
        self.experts = nn.ModuleList([ExpertMLP(cfg) for _ in range(self.num_experts)])
        self.routing_log = None  # set to a list to collect per-expert token counts

    def forward(self, hidden_states):
        batch_size, sequence_length, hidden_dim = hidden_states.shape
        hidden_states = hidden_states.view(-1, hidden_dim)
        router_logits = self.gate(hidden_states)
        routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
        routing_weights, selected_experts = torch.topk(routing_weights, self.top_k, dim=-1)
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
        routing_weights = routing_weights.to(hidden_states.dtype)
        final_hidden_states = torch.zeros((batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype,
                                          device=hidden_states.device)
        expert_mask = F.one_hot(selected_experts, num_classes=self.num_experts).permute(2, 1, 0)
        counts = []
        for expert_idx in range(self.num_experts):
            expert_layer = self.experts[expert_idx]
            idx, top_x = torch.where(expert_mask[expert_idx])
            counts.append(int(top_x.shape[0]))
            current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
            current_hidden_states = expert_layer(current_state) * routing_weights[top_x, idx, None]
            final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
        if self.routing_log is not None:
            self.routing_log.append(counts)
        final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)
        return final_hidden_states, router_logits


class DecoderLayer(nn.Module):
    """LlamaDecoderLayer / Qwen2DecoderLayer / MixtralDecoderLayer / Gemma2DecoderLayer.

    Called as transformers calls it: (hidden_states, attention_mask, position_ids, past_key_value,
    output_attentions, use_cache, cache_position, position_embeddings); returns a 1-tuple."""

    def __init__(self, cfg, layer_idx):
        super().__init__()
        self.model_type = cfg["model_type"]
        eps = cfg["rms_norm_eps"]
        h = cfg["hidden_size"]
        self.self_attn = Attention(cfg, layer_idx)
        if self.model_type == "gemma2":
            self.is_sliding = not bool(layer_idx % 2)
            self.sliding_window = cfg["sliding_window"]
            self.mlp = MLP(cfg)
            self.input_layernorm = Gemma2RMSNorm(h, eps)
            self.post_attention_layernorm = Gemma2RMSNorm(h, eps)
            self.pre_feedforward_layernorm = Gemma2RMSNorm(h, eps)
            self.post_feedforward_layernorm = Gemma2RMSNorm(h, eps)
        else:
            if self.model_type == "mixtral":
                self.block_sparse_moe = SparseMoeBlock(cfg)
            else:
                self.mlp = MLP(cfg)
            self.input_layernorm = LlamaRMSNorm(h, eps)
            self.post_attention_layernorm = LlamaRMSNorm(h, eps)

    def forward(self, hidden_states, attention_mask=None, position_ids=None, past_key_value=None,
                output_attentions=False, use_cache=False, cache_position=None, position_embeddings=None):
        if self.model_type == "gemma2":
            if self.is_sliding and attention_mask is not None:
                min_dtype = torch.finfo(hidden_states.dtype).min
                sliding_window_mask = torch.tril(torch.ones_like(attention_mask, dtype=torch.bool),
                                                 diagonal=-self.sliding_window)
                attention_mask = torch.where(sliding_window_mask, min_dtype, attention_mask)
            residual = hidden_states
            hidden_states = self.input_layernorm(hidden_states)
            hidden_states = self.self_attn(hidden_states, attention_mask, position_ids, position_embeddings)
            hidden_states = self.post_attention_layernorm(hidden_states)
            hidden_states = residual + hidden_states
            residual = hidden_states
            hidden_states = self.pre_feedforward_layernorm(hidden_states)
            hidden_states = self.mlp(hidden_states)
            hidden_states = self.post_feedforward_layernorm(hidden_states)
            hidden_states = residual + hidden_states
            return (hidden_states,)
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states = self.self_attn(hidden_states, attention_mask, position_ids, position_embeddings)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        if self.model_type == "mixtral":
            hidden_states, _router_logits = self.block_sparse_moe(hidden_states)
        else:
            hidden_states = self.mlp(hidden_states)
        hidden_states = residual + hidden_states
        return (hidden_states,)


class DecoderModel(nn.Module):
    """LlamaModel / Qwen2Model / MixtralModel / Gemma2Model (training, no cache, no attention_mask)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.gemma = cfg["model_type"] == "gemma2"
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"],
                                         cfg.get("pad_token_id") if self.gemma else None)
        self.layers = nn.ModuleList([DecoderLayer(cfg, i) for i in range(cfg["num_hidden_layers"])])
        self.norm = (Gemma2RMSNorm if self.gemma else LlamaRMSNorm)(cfg["hidden_size"], cfg["rms_norm_eps"])
        if not self.gemma:
            self.rotary_emb = RotaryEmbedding(cfg["head_dim"], cfg["rope_theta"])
        self.gradient_checkpointing = False

    def causal_mask(self, input_tensor, cache_position):
        """_update_causal_mask + _prepare_4d_causal_attention_mask_with_cache_position, no attention_mask."""
        dtype, device = input_tensor.dtype, input_tensor.device
        sequence_length = input_tensor.shape[1]
        # Gemma2 (HybridCache models) take target_length = seq; the others past_seen + seq + 1.
        target_length = sequence_length if self.gemma else sequence_length + 1
        min_dtype = torch.finfo(dtype).min
        causal_mask = torch.full((sequence_length, target_length), fill_value=min_dtype, dtype=dtype, device=device)
        if sequence_length != 1:
            causal_mask = torch.triu(causal_mask, diagonal=1)
        diagonal_attend_mask = torch.arange(target_length, device=device) > cache_position.reshape(-1, 1)
        if self.cfg["model_type"] == "qwen2" and self.cfg.get("sliding_window") is not None:
            # Qwen2's mask helper also marks keys beyond its sliding_window (none at these lengths).
            sliding_attend_mask = torch.arange(target_length, device=device) <= (
                cache_position.reshape(-1, 1) - self.cfg["sliding_window"])
            diagonal_attend_mask |= sliding_attend_mask
        causal_mask *= diagonal_attend_mask
        return causal_mask[None, None, :, :].expand(input_tensor.shape[0], 1, -1, -1)

    def forward(self, input_ids):
        inputs_embeds = self.embed_tokens(input_ids)
        cache_position = torch.arange(0, inputs_embeds.shape[1], device=inputs_embeds.device)
        position_ids = cache_position.unsqueeze(0)
        if self.gemma:
            with torch.no_grad():
                causal_mask = self.causal_mask(inputs_embeds, cache_position)
        else:
            causal_mask = self.causal_mask(inputs_embeds, cache_position)
        hidden_states = inputs_embeds
        if self.gemma:
            normalizer = torch.tensor(self.cfg["hidden_size"] ** 0.5, dtype=hidden_states.dtype)
            hidden_states = hidden_states * normalizer
            position_embeddings = None
        else:
            position_embeddings = self.rotary_emb(hidden_states, position_ids)
        for decoder_layer in self.layers:
            if self.gradient_checkpointing and self.training:
                layer_outputs = torch.utils.checkpoint.checkpoint(
                    decoder_layer.__call__, hidden_states, causal_mask, position_ids, None, False, False,
                    cache_position, position_embeddings, use_reentrant=True)
            else:
                layer_outputs = decoder_layer(hidden_states, attention_mask=causal_mask, position_ids=position_ids,
                                              past_key_value=None, output_attentions=False, use_cache=False,
                                              cache_position=cache_position,
                                              position_embeddings=position_embeddings)
            hidden_states = layer_outputs[0]
        return self.norm(hidden_states)


class CausalLM(nn.Module):
    """*ForCausalLM: model + lm_head (tied to embed_tokens when tie_word_embeddings); forward -> logits."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = DecoderModel(cfg)
        self.lm_head = nn.Linear(cfg["hidden_size"], cfg["vocab_size"], bias=False)
        self.final_softcap = cfg.get("final_logit_softcapping") if cfg["model_type"] == "gemma2" else None
        self.apply(self._init_weights)
        if cfg.get("tie_word_embeddings"):
            self.lm_head.weight = self.model.embed_tokens.weight

    def _init_weights(self, module):
        std = self.cfg["initializer_range"]
        if isinstance(module, nn.Linear):
            module.weight.data.normal_(mean=0.0, std=std)
            if module.bias is not None:
                module.bias.data.zero_()
        elif isinstance(module, nn.Embedding):
            module.weight.data.normal_(mean=0.0, std=std)
            if module.padding_idx is not None:
                module.weight.data[module.padding_idx].zero_()

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def forward(self, input_ids, num_logits_to_keep=0):
        hidden_states = self.model(input_ids)
        logits = self.lm_head(hidden_states[:, -num_logits_to_keep:, :])
        if self.final_softcap is not None:
            logits = logits / self.final_softcap
            logits = torch.tanh(logits)
            logits = logits * self.final_softcap
        return logits


def causal_lm_loss(logits, labels, vocab_size, style="shift", ignore_index=-100):
    """transformers' ForCausalLMLoss: "shift" (4.46 to 4.49) or "pad" (4.50 and later)."""
    logits = logits.float()
    if style == "shift":
        shift_logits = logits[..., :-1, :].contiguous()
        shift_labels = labels[..., 1:].contiguous()
        shift_logits = shift_logits.view(-1, vocab_size)
        shift_labels = shift_labels.view(-1)
        return F.cross_entropy(shift_logits, shift_labels, ignore_index=ignore_index, reduction="mean")
    labels = F.pad(labels, (0, 1), value=ignore_index)
    shift_labels = labels[..., 1:].contiguous()
    logits = logits.view(-1, vocab_size)
    shift_labels = shift_labels.view(-1)
    return F.cross_entropy(logits, shift_labels, ignore_index=ignore_index, reduction="mean")


def build_model(cfg):
    """The model in cfg["torch_dtype"], as from_pretrained(torch_dtype=...) leaves it: parameters in that dtype,
    the rotary inv_freq buffers fp32 (computed with .float() at init)."""
    model = CausalLM(cfg)
    dtype = DTYPES[cfg["torch_dtype"]]
    if dtype != torch.float32:
        for module in model.modules():
            for name, p in list(module._parameters.items()):
                if p is not None and p.dtype != dtype:
                    p.data = p.data.to(dtype)
    return model


# --------------------------------------------------------------------------
# LoRA (PEFT's Linear) and the HF training switches
# --------------------------------------------------------------------------

class LoraLinear(nn.Module):
    def __init__(self, base_layer, r, alpha, dropout, adapter_dtype=torch.float32):
        super().__init__()
        self.base_layer = base_layer
        self.lora_A = nn.Linear(base_layer.in_features, r, bias=False).to(adapter_dtype)
        self.lora_B = nn.Linear(r, base_layer.out_features, bias=False).to(adapter_dtype)
        self.lora_dropout = nn.Dropout(p=dropout) if dropout > 0 else nn.Identity()
        self.scaling = alpha / r
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        nn.init.normal_(self.lora_B.weight, std=0.01)  # PEFT: zeros (same memory)

    @property
    def in_features(self):
        return self.base_layer.in_features

    @property
    def out_features(self):
        return self.base_layer.out_features

    def forward(self, x):
        result = self.base_layer(x)
        torch_result_dtype = result.dtype
        x = x.to(self.lora_A.weight.dtype)
        result = result + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling
        return result.to(torch_result_dtype)


def apply_lora(model, targets, r, alpha, dropout):
    """get_peft_model(model, LoraConfig(r, lora_alpha, lora_dropout, target_modules=targets, bias="none")):
    every nn.Linear whose name ends in one of `targets` gets an adapter; all other parameters are frozen."""
    for p in model.parameters():
        p.requires_grad_(False)
    wrapped = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, nn.Linear) and child_name in targets:
                full = f"{name}.{child_name}" if name else child_name
                setattr(module, child_name, LoraLinear(child, r, alpha, dropout))
                wrapped.append(full)
    for n, p in model.named_parameters():
        p.requires_grad_(".lora_A." in n or ".lora_B." in n)
    return wrapped


def freeze_all_but_last(model):
    """Full fine-tuning of the last decoder layer, the final norm and lm_head (tied: embed_tokens too)."""
    n = len(model.model.layers)
    keep = (f"model.layers.{n - 1}.", "model.norm.", "lm_head.")
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith(keep))
    if model.cfg.get("tie_word_embeddings"):
        model.lm_head.weight.requires_grad_(True)


def gradient_checkpointing_enable(model):
    model.model.gradient_checkpointing = True


def enable_input_require_grads(model):
    def make_inputs_require_grads(module, inputs, output):
        output.requires_grad_(True)

    return model.get_input_embeddings().register_forward_hook(make_inputs_require_grads)
