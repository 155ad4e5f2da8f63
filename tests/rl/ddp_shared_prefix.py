"""Launch target of the shared-prefix DDP test (torchrun, 2 processes, gloo on CPU).

Each rank builds its own micro-batch (two groups, its own seed), wraps the tiny policy with TRL's
fused LM head in DistributedDataParallel, and takes the Dr. GRPO loss's gradient twice: through
TRL's repeated rows and through rl.shared_prefix. Writes one JSON file per rank with the largest
relative difference of the all-reduced gradients (argv: the model folder, an output folder)."""

import json
import sys
from pathlib import Path
from contextlib import nullcontext
from types import SimpleNamespace

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from transformers import AutoModelForCausalLM
from trl import GRPOTrainer
from trl.trainer.utils import add_fused_lm_head

from rl.shared_prefix import find_groups, shared_prefix_logps

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.float32)
add_fused_lm_head(model, outputs=("log_probs", "entropy"))
ddp = DistributedDataParallel(model)
G, M, P = 4, 12, 18
vocab = model.config.vocab_size
gen = torch.Generator().manual_seed(10 + rank)
rows = []
for g in range(2):
    prompt = torch.randint(300, vocab, (P - 3 * g,), generator=gen)
    for _ in range(G):
        n = int(torch.randint(1, M + 1, (1,), generator=gen))
        pid = torch.cat([torch.zeros(P - len(prompt), dtype=torch.long), prompt])
        pm = (pid != 0).long() if g else torch.ones(P, dtype=torch.long)
        cm = (torch.arange(M) < n).long()
        rows.append((pid, pm, torch.randint(300, vocab, (M,), generator=gen) * cm, cm))
pid, pm, cid, cm = (torch.stack([r[k] for r in rows]) for k in range(4))
ids, att = torch.cat([pid, cid], 1), torch.cat([pm, cm], 1)
adv = torch.randn(len(rows), 1, generator=gen)
trl_self = SimpleNamespace(accelerator=SimpleNamespace(autocast=nullcontext))
trl_logps = GRPOTrainer._get_per_token_logps_and_entropies.__wrapped__  # without TRL's profiling wrapper
with torch.no_grad():
    old = trl_logps(trl_self, model, ids, att, M)[0]
    old = old + (torch.rand(old.shape, generator=gen) - 0.5) * 0.6


def step(shared: bool):
    ddp.zero_grad(set_to_none=True)
    if shared:
        logps, _ = shared_prefix_logps(ddp, ids, att, M, find_groups(pid, pm), attn_impl="sdpa")
    else:
        logps = trl_logps(trl_self, ddp, ids, att, M)[0]
    ratio = torch.exp(logps - old)
    per_token = -torch.min(ratio * adv, torch.clamp(ratio, 0.8, 1.2) * adv)
    loss = (per_token * cm).sum() / (len(rows) * M)   # Dr. GRPO
    loss.backward()                                   # DDP all-reduces the gradients here
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


loss_s, g_s = step(True)
loss_r, g_r = step(False)
losses = [torch.zeros(()) for _ in range(2)]
dist.all_gather(losses, loss_r)


def rel(a, b):
    return float((a - b).abs().max() / b.abs().max().clamp(min=1e-30))


Path(sys.argv[2], f"rank{rank}.json").write_text(json.dumps({"rank": rank, "params": len(g_r), "max_rel_grad_diff": max(rel(g_s[n], g_r[n]) for n in g_r),
                  "rel_loss_diff": rel(loss_s, loss_r), "ranks_differ": bool(losses[0] != losses[1])}))
dist.destroy_process_group()
