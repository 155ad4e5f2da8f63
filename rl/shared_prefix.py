"""Shared-prefix training forward: a group's prompt is encoded once, not once per completion.

TRL's GRPOTrainer scores a micro-batch as ``B`` rows of ``[prompt | completion]``: the group's prompt
(system prompt, tool schemas, request: ~500 of the demo's ~600 tokens) is forwarded and
backpropagated G times. :class:`SharedPrefixGRPOTrainer` packs every set of rows that share a
prompt into ONE sequence,

    [prompt[:-1] | p c_1 | p c_2 | ... | p c_G]          (p: the prompt's last token, copied)

with a mask under which the prompt is causal, and each segment ``p c_i`` attends to the prompt
plus its own causal past; each token keeps the position id it has in TRL's row (its column), so
RoPE sees the same positions. Copying ``p`` into each segment (G extra tokens) lets its hidden
state predict each completion's first token through TRL's own fused LM head (``shift_labels``:
one label per position), so log-probs, entropies, temperature and logit scaling are computed by
the same code as TRL's path. Tokens whose attention mask is 0 inside a completion stay as
queries that no one attends to, as in TRL's row. Forward tokens drop from G*(P+R) to P+G*(R+1);
the outputs and the gradients are the same up to float summation order (tests/rl/test_shared_prefix.py).

The mask goes to the model as transformers 5.x takes a custom mask: a 4D tensor is used as it is
(``masking_utils._preprocess_mask_arguments``), boolean for ``sdpa``, additive for ``eager``; a
``BlockMask`` for ``flex_attention``. Other attention functions (flash-attention's varlen kernels,
paged attention) get the repeated path, as do multimodal inputs, MoE auxiliary losses and a
micro-batch in which no two rows share a prompt; each reason is logged once. Where a generation
batch is split into several micro-batches (``steps_per_generation`` > 1), TRL's row shuffle
would scatter each group over them; this trainer shuffles whole groups instead.

Why not the ``prefix-grouper`` package (0.0.1.post1, what verl's ``use_prefix_grouper`` uses):

- Its transformers hook (``register_attention``) registers an ``AttentionInterface`` function that
  ignores the mask transformers built and calls the wrapped function (default
  ``flash_attention_2``) twice: prefix self-attention, then suffix queries against the prefix K/V
  repeated per sample, with 2D padding masks and a causal flag. That relies on flash-attention's
  bottom-right causal alignment for ``q_len < kv_len``; torch SDPA's ``is_causal`` is top-left and
  transformers' ``sdpa_attention_forward`` expects a 4D mask, so on our CPU (SDPA, no
  flash-attention) it would compute something else, silently.
- The model must take a ``prefix_grouper`` argument in its forward and the caller must build the
  packed inputs and position ids (verl ships a modified ``modeling_qwen3.py``; it is incompatible
  with remove-padding, fused kernels and dynamic batch size there); TRL's fused LM head and
  per-token log-prob extraction would have to be rewritten around its ``split_output``.
- Transformers 5.x already accepts a custom 4D / BlockMask mask for every Qwen2-shaped model, so
  a mask builder plus input packing is all that is needed, with no patched attention.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

import torch
from trl import GRPOTrainer
from trl.trainer.utils import shuffle_sequence_dict as trl_shuffle

log = logging.getLogger("tooldojo.rl.shared_prefix")

__all__ = ["SUPPORTED_ATTENTION", "Packing", "SharedPrefixGRPOTrainer", "find_groups", "forward_costs",
           "pack_groups", "segment_mask", "shared_prefix_logps", "shuffle_whole_groups", "split_groups",
           "trainer_class"]

SUPPORTED_ATTENTION = ("sdpa", "eager", "flex_attention")
IGNORE = -100


@dataclass
class Packing:
    """Rows of packed groups, and where each original row's log-probs are found in them."""

    input_ids: torch.Tensor      # [n, T]
    position_ids: torch.Tensor   # [n, T]: the token's column in TRL's [prompt | completion] row
    segment: torch.Tensor        # [n, T]: 0 the shared prompt, k >= 1 the k-th completion, -1 padding
    key_valid: torch.Tensor      # [n, T] bool: may be attended to (TRL's attention mask)
    shift_labels: torch.Tensor   # [n, T]: the token this position predicts, IGNORE where none is scored
    row: torch.Tensor            # [B]: the packed row holding original row b
    start: torch.Tensor          # [B]: the index of row b's copy of the prompt's last token
    extent: torch.Tensor         # [B]: completion tokens of row b kept (up to its last unmasked one)

    @property
    def tokens(self) -> int:
        return int((self.segment >= 0).sum())


def find_groups(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> list[list[int]]:
    """Row indices grouped by identical prompt (tokens and padding), in order of first appearance."""
    key = torch.where(prompt_mask.bool(), prompt_ids, torch.full_like(prompt_ids, -1))
    _, inverse = torch.unique(key, dim=0, return_inverse=True)
    groups: dict[int, list[int]] = {}
    for b, g in enumerate(inverse.tolist()):
        groups.setdefault(g, []).append(b)
    return list(groups.values())


def completion_extents(attention_mask: torch.Tensor, logits_to_keep: int) -> torch.Tensor:
    """``[B]``: each row's completion tokens kept, up to its last unmasked one (trailing padding dropped)."""
    cmask = attention_mask[:, attention_mask.size(1) - logits_to_keep:].bool()
    cols = torch.arange(logits_to_keep, device=cmask.device)
    return torch.where(cmask, cols + 1, torch.zeros_like(cols)).amax(dim=1)


def pack_groups(input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
                groups: list[list[int]], pad_id: int = 0) -> Packing:
    """Pack each group's rows (TRL's ``[prompt | completion]`` layout, ``logits_to_keep`` completion
    columns) into one sequence; ValueError for a prompt with no unmasked token."""
    dev = input_ids.device
    lp = input_ids.size(1) - logits_to_keep
    am = attention_mask.bool()
    cmask = am[:, lp:]
    cols = torch.arange(logits_to_keep, device=dev)
    extent = completion_extents(attention_mask, logits_to_keep)
    B = input_ids.size(0)
    row, start = torch.zeros(B, dtype=torch.long), torch.zeros(B, dtype=torch.long)
    seqs = []
    for r, members in enumerate(groups):
        rep = members[0]
        pcols = am[rep, :lp].nonzero().squeeze(1)
        if pcols.numel() == 0:
            raise ValueError(f"row {rep}'s prompt has no unmasked token")
        head, last = pcols[:-1], pcols[-1:]
        ids, pos, seg, valid, labels = [input_ids[rep, head]], [head], [torch.zeros_like(head)], \
            [torch.ones_like(head, dtype=torch.bool)], [torch.full_like(head, IGNORE)]
        offset = head.numel()
        for k, b in enumerate(members, start=1):
            e = int(extent[b])
            comp = input_ids[b, lp:lp + e]
            ok = cmask[b, :e]
            ids.append(torch.cat([input_ids[rep, last], comp]))
            pos.append(torch.cat([last, lp + cols[:e]]))
            seg.append(torch.full((e + 1,), k, dtype=torch.long, device=dev))
            valid.append(torch.cat([torch.ones(1, dtype=torch.bool, device=dev), ok]))
            # position j of the segment predicts completion token j (the copy of `last` predicts the first)
            target = torch.where(ok, comp, torch.full_like(comp, IGNORE))
            labels.append(torch.cat([target, torch.full((1,), IGNORE, dtype=torch.long, device=dev)]))
            row[b], start[b] = r, offset
            offset += e + 1
        seqs.append([torch.cat(x) for x in (ids, pos, seg, valid, labels)])
    T = max(s[0].numel() for s in seqs)

    def stacked(i: int, fill: Any) -> torch.Tensor:
        out = torch.full((len(seqs), T), fill, dtype=seqs[0][i].dtype, device=dev)
        for r, s in enumerate(seqs):
            out[r, : s[i].numel()] = s[i]
        return out

    return Packing(input_ids=stacked(0, pad_id), position_ids=stacked(1, 0), segment=stacked(2, -1),
                   key_valid=stacked(3, False), shift_labels=stacked(4, IGNORE), row=row.to(dev),
                   start=start.to(dev), extent=extent)


def segment_mask(segment: torch.Tensor, key_valid: torch.Tensor) -> torch.Tensor:
    """``[n, 1, T, T]`` bool, True = may attend: causal within the prompt; a completion's tokens see
    the prompt and their own segment's past; padding sees only itself (no row is empty, so no NaN)."""
    T = segment.size(1)
    idx = torch.arange(T, device=segment.device)
    causal = idx[:, None] >= idx[None, :]
    sq, sk = segment[:, :, None], segment[:, None, :]
    allowed = causal & ((sk == 0) | (sk == sq)) & key_valid[:, None, :] & (sq >= 0)
    allowed |= torch.eye(T, dtype=torch.bool, device=segment.device) & (sq < 0)
    return allowed[:, None]


def _flex_block_mask(segment: torch.Tensor, key_valid: torch.Tensor):
    from torch.nn.attention.flex_attention import create_block_mask

    def mask_mod(b, h, q, k):
        sq, sk = segment[b, q], segment[b, k]
        seen = (q >= k) & ((sk == 0) | (sk == sq)) & key_valid[b, k] & (sq >= 0)
        return seen | ((q == k) & (sq < 0))

    n, T = segment.shape
    return create_block_mask(mask_mod, B=n, H=None, Q_LEN=T, KV_LEN=T, device=segment.device)


def attention_mask_for(impl: str, pk: Packing, dtype: torch.dtype, mask_fn: Callable = segment_mask):
    """The mask in the form transformers' ``impl`` attention takes a custom one."""
    if impl == "flex_attention":
        return _flex_block_mask(pk.segment, pk.key_valid)
    allowed = mask_fn(pk.segment, pk.key_valid)
    if impl == "eager":  # eager adds the mask to the scores
        return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(
            ~allowed, torch.finfo(dtype).min)
    return allowed


def _chunks(groups: list[list[int]], max_rows: int) -> list[list[list[int]]]:
    """Whole groups, at most ``max_rows`` completions per forward (a larger group goes alone)."""
    out: list[list[list[int]]] = [[]]
    rows = 0
    for g in groups:
        if out[-1] and rows + len(g) > max_rows:
            out.append([])
            rows = 0
        out[-1].append(g)
        rows += len(g)
    return out


def split_groups(groups: list[list[int]], prompt_tokens: list[int], extent: list[int], per_token: float,
                 per_pair: float) -> list[list[int]]:
    """Each group cut into packed rows of ``k`` completions, ``k`` chosen per group to minimise the
    forward's estimated cost, ``per_token * T + per_pair * T**2`` per packed row of ``T`` tokens.

    A packed row's attention is dense under the mask (every query against every key, masked or
    not), so G completions of R tokens behind a prompt of P cost ``(P + G*R)**2`` pairs, against
    ``G*(P + R)**2`` for TRL's rows: sharing pays while the prompt dominates and loses once the
    completions do (multi-turn episodes with long tool outputs). Each packed row is still a valid
    group (rows with the same prompt), so the values are the same for every ``k``."""
    out: list[list[int]] = []
    for g, p in zip(groups, prompt_tokens, strict=True):
        best, best_cost = len(g), None
        for k in range(len(g), 0, -1):
            rows = [g[i:i + k] for i in range(0, len(g), k)]
            lengths = [p + sum(extent[b] + 1 for b in r) for r in rows]
            cost = sum(per_token * t + per_pair * t * t for t in lengths)
            if best_cost is None or cost < best_cost:
                best, best_cost = k, cost
        out += [g[i:i + best] for i in range(0, len(g), best)]
    return out


def forward_costs(config: Any) -> tuple[float, float]:
    """FLOPs per token (the weights: ~2 per parameter) and per attended query-key pair (QK and AV
    over every layer: ~4 per hidden unit) of a decoder's forward, from its config."""
    h = int(config.hidden_size)
    layers = int(config.num_hidden_layers)
    inter = int(getattr(config, "intermediate_size", 4 * h) or 4 * h)
    params = layers * (4 * h * h + 3 * h * inter) + int(config.vocab_size) * h
    return 2.0 * params, 4.0 * layers * h


def _take(x: torch.Tensor, src: torch.Tensor, kept: torch.Tensor) -> torch.Tensor:
    """``x``'s values at the flat indices ``src`` where ``kept``, else 0 (differentiable)."""
    return torch.where(kept, x.reshape(-1)[src], torch.zeros((), dtype=x.dtype, device=x.device))


def shared_prefix_logps(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
                        groups: list[list[int]], *, attn_impl: str, compute_entropy: bool = False,
                        max_rows: int | None = None, autocast: Callable = nullcontext,
                        mask_fn: Callable = segment_mask) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probs (and entropies) of the completion columns, ``[B, logits_to_keep]``, as
    TRL's ``_get_per_token_logps_and_entropies`` returns them (0 where the attention mask is 0).
    ``model`` carries TRL's fused LM head (``trl.trainer.utils.add_fused_lm_head``)."""
    B = input_ids.size(0)
    pieces: list[tuple[list[int], torch.Tensor, torch.Tensor | None]] = []
    dtype = next(model.parameters()).dtype
    for chunk in _chunks(groups, max_rows or B):
        pk = pack_groups(input_ids, attention_mask, logits_to_keep, chunk)
        with autocast():
            out = model(input_ids=pk.input_ids, attention_mask=attention_mask_for(attn_impl, pk, dtype, mask_fn),
                        position_ids=pk.position_ids, shift_labels=pk.shift_labels, fused_lm_head=True)
        members = [b for g in chunk for b in g]
        idx = torch.tensor(members, device=input_ids.device)
        cols = torch.arange(logits_to_keep, device=input_ids.device)
        T = pk.input_ids.size(1)
        src = pk.row[idx, None] * T + (pk.start[idx, None] + cols).clamp(max=T - 1)
        kept = cols < pk.extent[idx, None]
        pieces.append((members, _take(out.log_probs, src, kept),
                       _take(out.entropy, src, kept) if compute_entropy else None))
    # assemble in the original row order (index_put keeps the graph)
    order = torch.tensor([b for m, _, _ in pieces for b in m], device=input_ids.device)

    def assembled(xs: list[torch.Tensor]) -> torch.Tensor:
        x = torch.cat(xs)
        return x.new_zeros((B, logits_to_keep)).index_put((order,), x)

    return (assembled([p for _, p, _ in pieces]),
            assembled([e for _, _, e in pieces]) if compute_entropy else None)


def shuffle_whole_groups(seq_dict: dict[str, Any], group: int) -> dict[str, Any]:
    """TRL's ``shuffle_sequence_dict``, permuting whole groups of ``group`` consecutive rows (a
    generation batch holds each prompt's completions side by side), so that every micro-batch
    split from it holds whole groups. Dr. GRPO sums a generation batch's micro-batch losses with
    one constant normaliser, so which rows share a micro-batch does not change the gradient."""
    n = len(next(v for v in seq_dict.values() if v is not None))
    if group < 2 or n % group:
        return trl_shuffle(seq_dict)
    perm = (torch.randperm(n // group)[:, None] * group + torch.arange(group)).reshape(-1)

    def permute(v: Any) -> Any:
        if v is None or (isinstance(v, torch.Tensor) and v.ndim == 0):
            return v
        if isinstance(v, torch.Tensor):
            return v[perm.to(v.device)]
        return [v[i] for i in perm.tolist()]

    return {k: permute(v) for k, v in seq_dict.items()}


@contextmanager
def _group_shuffle(group: int):
    """TRL's ``_prepare_inputs`` shuffles rows before splitting the generation batch into
    micro-batches, which scatters a group over them; for its duration, shuffle whole groups."""
    import trl.trainer.grpo_trainer as grpo_module

    grpo_module.shuffle_sequence_dict = functools.partial(shuffle_whole_groups, group=group)
    try:
        yield
    finally:
        grpo_module.shuffle_sequence_dict = trl_shuffle


def trainer_class(shared_prefix: bool) -> type[GRPOTrainer]:
    """The trainer ``rl.trainer.build_trainer`` builds: TRL's own where the switch is off."""
    return SharedPrefixGRPOTrainer if shared_prefix else GRPOTrainer


class SharedPrefixGRPOTrainer(GRPOTrainer):
    """GRPOTrainer whose log-prob forwards (policy, old policy, reference) share each group's
    prompt; falls back to TRL's repeated rows where that cannot apply, saying why once."""

    shared_prefix: bool = True
    # every `check_every`-th optimizer step (0: never), the first log-prob forward of the step is
    # also scored on the repeated rows, without gradients; a difference over `check_tolerance`
    # (nats, on any scored token) turns the shared path off for the rest of the run, with a warning
    check_every: int = 0
    check_tolerance: float = 1e-3
    # cut a group into packed rows of fewer completions where that costs less (split_groups)
    split_groups: bool = True

    def _shared_prefix_blocker(self, model, compute_aux_loss: bool, extra: dict[str, Any]) -> str | None:
        unwrapped = self.accelerator.unwrap_model(model)
        impl = getattr(unwrapped.config, "_attn_implementation", None)
        if impl not in SUPPORTED_ATTENTION:
            return f"attention implementation {impl!r} takes no custom mask here (supported: {SUPPORTED_ATTENTION})"
        if compute_aux_loss:
            return "the MoE auxiliary loss is computed per row"
        used = sorted(k for k, v in extra.items() if v is not None)
        if used:
            return f"multimodal / typed inputs ({', '.join(used)})"
        return None

    def _fallback(self, why: str) -> None:
        said = self.__dict__.setdefault("_shared_prefix_said", set())
        if why not in said:
            said.add(why)
            log.info("shared-prefix forward not applied, scoring repeated rows: %s", why)

    def _record_tokens(self, input_ids, attention_mask, logits_to_keep: int, groups: list[list[int]]) -> None:
        """Logs ``shared_prefix/forward_token_fraction``: the packed forward's tokens over TRL's rows'."""
        lp = input_ids.size(1) - logits_to_keep
        kept = int(completion_extents(attention_mask, logits_to_keep).sum())
        prompts = int(attention_mask[[g[0] for g in groups], :lp].sum())
        packed = prompts - len(groups) + kept + input_ids.size(0)
        fraction = packed / input_ids.numel()
        if not self.__dict__.get("_shared_prefix_applied"):
            self._shared_prefix_applied = True
            log.info("shared-prefix forward: %d rows in %d groups, %d forward tokens instead of %d (%.0f%%)",
                     input_ids.size(0), len(groups), packed, input_ids.numel(), 100 * fraction)
        self._metrics["train" if self.model.training else "eval"]["shared_prefix/forward_token_fraction"].append(
            fraction)

    def _prepare_inputs(self, generation_batch):
        if not self.shared_prefix or self.args.steps_per_generation < 2:
            return super()._prepare_inputs(generation_batch)
        with _group_shuffle(self.num_generations):
            return super()._prepare_inputs(generation_batch)

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep,
                                           batch_size=None, compute_entropy=False, compute_aux_loss=False,
                                           **extra):
        def repeated():
            return super(SharedPrefixGRPOTrainer, self)._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size=batch_size,
                compute_entropy=compute_entropy, compute_aux_loss=compute_aux_loss, **extra)

        if not self.shared_prefix:
            return repeated()
        why = self._shared_prefix_blocker(model, compute_aux_loss, extra)
        lp = input_ids.size(1) - logits_to_keep
        groups = find_groups(input_ids[:, :lp], attention_mask[:, :lp]) if why is None else []
        if why is None and all(len(g) == 1 for g in groups):
            why = "no two completions of a micro-batch share a prompt"
        if why is None and not bool(attention_mask[:, :lp].any(dim=1).all()):
            why = "a row has an empty prompt"
        if why is not None:
            self._fallback(why)
            return repeated()
        config = self.accelerator.unwrap_model(model).config
        impl = config._attn_implementation
        if self.split_groups:
            extent = completion_extents(attention_mask, logits_to_keep).tolist()
            prompts = attention_mask[[g[0] for g in groups], :lp].sum(dim=1).tolist()
            groups = split_groups(groups, prompts, extent, *forward_costs(config))
            if all(len(g) == 1 for g in groups):
                self._fallback("the completions are long enough that repeated rows cost less than a shared prompt")
                return repeated()
        self._record_tokens(input_ids, attention_mask, logits_to_keep, groups)
        logps, ents = shared_prefix_logps(model, input_ids, attention_mask, logits_to_keep, groups,
                                          attn_impl=impl, compute_entropy=compute_entropy, max_rows=batch_size,
                                          autocast=self.accelerator.autocast)
        if self._check_due():
            with torch.no_grad():
                want = repeated()[0]
            if not self._agrees(logps, want, attention_mask[:, lp:]):
                return repeated()
        return logps, ents, None

    def _check_due(self) -> bool:
        step = self.state.global_step
        if not self.check_every or step % self.check_every or self.__dict__.get("_checked_step") == step:
            return False
        self._checked_step = step
        return True

    def _agrees(self, got: torch.Tensor, want: torch.Tensor, mask: torch.Tensor) -> bool:
        """Logs ``shared_prefix/max_logp_diff`` on the scored tokens; False (and the shared path off
        from now on) where it is over the tolerance."""
        diff = float(((got.detach() - want).abs() * mask).max()) if mask.any() else 0.0
        self._metrics["train" if self.model.training else "eval"]["shared_prefix/max_logp_diff"].append(diff)
        if diff <= self.check_tolerance:
            return True
        log.warning("shared-prefix log-probs differ from the repeated rows' by %.3g nats at step %d (tolerance "
                    "%.3g): scoring repeated rows for the rest of the run", diff, self.state.global_step,
                    self.check_tolerance)
        self.shared_prefix = False
        return False
