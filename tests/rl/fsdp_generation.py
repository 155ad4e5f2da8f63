"""Launch target of the FSDP generation test (torchrun, 2 processes, gloo on CPU).

The tiny policy is sharded with FSDP2 (``fully_shard`` per decoder layer and at the root, as
accelerate's TRANSFORMER_BASED_WRAP does) and takes one optimizer step; an unsharded copy takes the
same step. rl.distributed.PolicyForGeneration must then hold the copy's weights exactly, and
generate its tokens, while the two ranks generate different numbers of requests (a sharded forward
is a collective, so this would hang without the replica). Prints one JSON line per rank."""

import json
import sys
from types import SimpleNamespace

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from transformers import AutoModelForCausalLM, AutoTokenizer

from rl.distributed import PolicyForGeneration
from rl.rollout import GenRequest, HFGenerator, Sampling

dist.init_process_group("gloo")
rank = dist.get_rank()
path = sys.argv[1]
tok = AutoTokenizer.from_pretrained(path)
torch.manual_seed(0)
ref = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
sharded = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
for layer in sharded.model.layers:
    fully_shard(layer)
fully_shard(sharded)

batch = torch.randint(0, len(tok), (2, 12), generator=torch.Generator().manual_seed(1))  # the same on both ranks
for model in (ref, sharded):
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    model(input_ids=batch, labels=batch).loss.backward()
    opt.step()

trainer = SimpleNamespace(model=sharded, model_wrapped=sharded, state=SimpleNamespace(global_step=1),
                          args=SimpleNamespace(bf16=False),
                          accelerator=SimpleNamespace(device=torch.device("cpu"), unwrap_model=lambda m: m))
policy = PolicyForGeneration(trainer)
policy.refresh()  # the collective: both ranks, once
replica = policy()
want = ref.state_dict()
max_diff = max((replica.state_dict()[k] - want[k]).abs().max().item() for k in want)

eos = [tok.convert_tokens_to_ids("<|im_end|>")]
prompt = tok("hello there", add_special_tokens=False)["input_ids"]
requests = [GenRequest(prompt, 16, seed=100 + i) for i in range(1 + 2 * rank)]  # rank 0: 1, rank 1: 3
gen = HFGenerator(policy, tok, Sampling(), eos_ids=eos, context_limit=512)
base = HFGenerator(lambda: ref, tok, Sampling(), eos_ids=eos, context_limit=512)
same = [a.ids == b.ids for r in requests for a, b in [(gen.generate([r])[0], base.generate([r])[0])]]
print(json.dumps({"rank": rank, "sharded": policy.sharded, "is_replica": replica is not sharded,
                  "max_diff": max_diff, "same_tokens": same}), flush=True)
dist.destroy_process_group()
