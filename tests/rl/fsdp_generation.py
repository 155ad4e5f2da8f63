"""Launch target of the FSDP generation test (torchrun, 2 processes, gloo on CPU).

The tiny policy is sharded with FSDP2 (``fully_shard`` per decoder layer and at the root, as
accelerate's TRANSFORMER_BASED_WRAP does) and takes one optimizer step; an unsharded copy takes the
same step. rl.distributed.PolicyForGeneration must then hold the copy's weights exactly, and
generate its tokens, while the two ranks generate different numbers of requests (a sharded forward
is a collective, so this would hang without the replica).

Then the same sharded policy generates by itself, in lockstep (``rollout.fsdp_generation: sharded``,
rl.distributed.LockstepHFGenerator behind rl.batcher.GenerationBatcher): rank 0 runs one episode of
one turn, rank 1 three episodes, one of them three turns long, so rank 0 must join rank 1's later
rounds with dummies; every greedy answer must equal the unsharded model's. Prints one JSON line per
rank."""

import asyncio
import json
import sys
from types import SimpleNamespace

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from transformers import AutoModelForCausalLM, AutoTokenizer

from rl.batcher import GenerationBatcher
from rl.distributed import LockstepHFGenerator, PolicyForGeneration
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

# --- lockstep: the sharded model generates itself
sharded_policy = PolicyForGeneration(trainer, mode="sharded")
sharded_policy.refresh()  # nothing to gather
greedy = Sampling(temperature=0.0)
lock = LockstepHFGenerator(HFGenerator(sharded_policy, tok, greedy, eos_ids=eos, context_limit=512))
ref_greedy = HFGenerator(lambda: ref, tok, greedy, eos_ids=eos, context_limit=512)
batcher = GenerationBatcher(lock, max_wait_s=5.0)
turns = [1] if rank == 0 else [1, 3, 1]
answers: list[tuple[list[int], list[int]]] = []


async def episode(n_turns: int, k: int) -> None:
    ids = prompt + [k + 5]
    try:
        for _ in range(n_turns):
            res = await batcher.generate(GenRequest(list(ids), 8))
            answers.append((list(ids), res.ids))
            ids = ids + res.ids + [7, 8, 9]  # a tool's output, then the next turn
    finally:
        batcher.leave()


async def episodes() -> None:
    await asyncio.gather(*(episode(n, k) for k, n in enumerate(turns)))


for _ in turns:
    batcher.enter()
import concurrent.futures  # noqa: E402
import threading  # noqa: E402

done: concurrent.futures.Future = concurrent.futures.Future()
threading.Thread(target=lambda: done.set_result(asyncio.run(episodes())), daemon=True).start()
batcher.serve(done)
done.result()
lock_same = [ref_greedy.generate([GenRequest(p, 8)])[0].ids == got for p, got in answers]
print(json.dumps({"rank": rank, "sharded": policy.sharded, "is_replica": replica is not sharded,
                  "max_diff": max_diff, "same_tokens": same, "lockstep": sharded_policy.lockstep,
                  "lockstep_same": lock_same, "rounds": lock.rounds, "idle_rounds": lock.idle_rounds,
                  "generates_with_the_sharded_model": sharded_policy() is sharded}), flush=True)
dist.destroy_process_group()
