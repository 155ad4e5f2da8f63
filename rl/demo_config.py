"""What `dojo demo` is configured by and what it reports: plain data (rl.demo runs it, rl.demo_report
renders it), and the pretrained base's manifest summary both show."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rl.config import TinyModelParams
from rl.sft import SFTSettings

# The dojo-train config the demo starts from (model and tasks are filled in by the demo).
DEFAULT_TRAIN: dict[str, Any] = {
    # max_steps 30 (960 episodes): at 40 the demo's Dr. GRPO added +0.7 multi-step on 3 H200 seeds
    # (bench/results/reader_gpu.md section 20) and 1.5 of the 2-core demo's minutes went to the last 10 steps
    "grpo": {"loss_type": "dr_grpo", "scale_rewards": "none", "beta": 0.0, "num_generations": 8,
             # a small step: Adam moves every weight by about lr per step, and at 1e-3 a primed tiny
             # policy falls apart within a few steps
             # the completion budget counts the tool outputs too (rl.token_agent): a look-up's device
             # list is 400-1,000 tokens, and at 256 every look-up episode ran out before its second call
             "max_completion_length": 1024, "learning_rate": 1e-4, "per_device_train_batch_size": 32,
             "gradient_accumulation_steps": 1, "max_steps": 30, "temperature": 1.0, "epsilon": 0.2,
             "gradient_checkpointing": False},
    # max_turns 4: a look-up, the act, a verifying read and the answer (the primed traces of the multi-step
    # families need up to 4 agent messages, the single-action ones 2-3)
    "rollout": {"use_vllm": True, "vllm_mode": "colocate", "max_turns": 4, "max_tool_calls": 6, "user": "scripted",
                "sandbox_backend": "auto", "system_prompt": "brief"},
    # Success-shaped and not hackable by doing nothing: no world-state match, no reward; the reported
    # outputs add the other half. (Turn-format or vacuous-communication credit taught a tiny policy
    # to end every turn at once.)
    "reward": {"components": [{"name": "world_state", "kind": "world_state", "weight": 0.5},
                              {"name": "communication", "kind": "communication", "weight": 0.5}],
               "gate": ["world_state"]},
    "run": {"seed": 0, "logging": [], "save_steps": 1000},
    # each group's prompt scored once (rl.shared_prefix, groups split where long completions make that
    # cheaper): the same log-probs to ~1e-6 nats, 1.7x faster forward+backward at the multi-step demo's
    # shapes (bench/results/rl_speed_prefix_split_multistep_cpu.json); checked at the first step
    "trainer": {"shared_prefix": True, "shared_prefix_check_every": 1000},
}


class DemoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    out_dir: str = "runs/demo"
    seed: int = 0
    base: str = Field("pretrained", description="pretrained: the shipped base (rl/base); random: a random-init "
                                               "rl.tiny model shaped by `tiny`; else a model folder or Hugging Face id")
    tiny: TinyModelParams = Field(default_factory=lambda: TinyModelParams(hidden=128, layers=2, heads=4))
    # home_devices: the shipped base's corpus leaves it out (docs only; rl.corpus exclude_domains), so its
    # held-out tasks are unseen; from that base the scene tasks prime to 95-100%, the device tasks to ~20% and
    # the multi-step families to 0-3% sampled (docs/demo_result.json): the room Dr. GRPO works in
    domains: list[str] = Field(default_factory=lambda: ["home_devices"])
    # 400, not 700: single-action traces were 54% of the SFT tokens, and the 2-core demo's 15 minutes need the time
    tasks: int = Field(400, gt=1, description="single-action tasks to synthesise (train + held-out)")
    held_out: int = Field(40, gt=0)
    distractors: int = Field(1, ge=0, description="tools offered besides the gold one")
    quote_values: bool = Field(True, description="the user writes string values in quotes (device id: \"LT-3\"), "
                                                  "so they tokenize as inside the JSON arguments")
    domain_seeds: int = Field(32, gt=0, description="worlds per domain the tasks are drawn from (synth.tasks."
                                                  "DOMAIN_SEEDS); more worlds make an agent read values it could "
                                                  "otherwise recall")
    quote_fields: bool = Field(True, description="the user asks for the outputs by the keys the tool output writes "
                                                  "them under (tell me the \"name\" and the \"type\"), the tokens a "
                                                  "keyed answer repeats (issue 28)")
    condition: str = Field("all", description="the priming condition (synth.behaviours.CONDITIONS)")
    prime_drills: int = Field(0, ge=0, description="foreign-world copy drills of each demo domain added to the "
                                                   "priming traces, per kind (a read in a device list, a read of "
                                                   "one record; rl.copy_drills.priming_drills, issue 28); measured "
                                                   "worse at 150 (bench/results/reader_gpu.md section 30)")
    answers: Literal["plain", "quoted", "keyed", "keyed_plan"] = Field(
        "keyed", description="how priming traces say the task's outputs: plain, quoted as a JSON tool output writes "
                             "them (the output's token ids), keyed (`\"name\": \"Porch light\"`, the output's own "
                             "key-value pair), or keyed_plan (keyed, and the plan names the keys the user asked for) "
                             "(synth.behaviours.ANSWER_STYLES; issue 28)")
    narrow_reads: bool = Field(False, description="a look-up priming trace lists with the filters the user's words "
                                                  "say (room \"Hallway\", type \"light\"), so the id is picked "
                                                  "from fewer records (synth.narrow_reads; issue 28)")
    # max_length 2048 (the base's context): a look-up trace with the whole device list runs to ~2,000 tokens;
    # batches of similar lengths: random batches of the demo's traces pad 703k tokens to 1.22M
    # 2 epochs, not 3: the third took 2 of the 2-core demo's minutes; primed on the H200 it is worth 3.8 points
    # sampled and 3.3 multi-step (3 seeds; bench/results/reader_gpu.md section 20), the price of the 15 minutes
    sft: SFTSettings = Field(default_factory=lambda: SFTSettings(epochs=2, learning_rate=3e-3, batch_size=8,
                                                                 max_length=2048, group_by_length=True))
    eval_samples: int = Field(4, gt=0, description="sampled episodes per held-out task and policy")
    # the unprimed base scores ~0% (it has never seen a tool call answered): its 4 samples per task took
    # 3.2 of the held-out evaluation's 6.2 minutes in the fresh-clone demo, to measure 0%
    base_eval_samples: int = Field(1, gt=0, description="sampled episodes per held-out task for the base policy "
                                                        "(plus the greedy one with base_eval_greedy)")
    base_eval_greedy: bool = Field(False, description="also one greedy episode per task for the base policy")
    multistep: dict[str, int] = Field(
        default_factory=lambda: {"lookup_act": 150, "read_report": 150, "ask_user": 150},
        description="tasks to synthesise per multi-step family (synth.task_families.MULTISTEP); {} for "
                    "single-action tasks only")
    multistep_held_out: int = Field(27, ge=1, description="held-out tasks per multi-step family")
    rl_multistep: dict[str, int] = Field(
        default_factory=dict,
        description="fresh multi-step tasks per family for Dr. GRPO alone (rl.demo.rl_tasks): never primed on, "
                    "from synthesis seeds of their own, none naming an entity of a held-out multi-step task; "
                    "{}: Dr. GRPO trains on the priming tasks")
    curve_every: int = Field(15, ge=0, description="Dr. GRPO steps between learning-curve points (0: no curve)")
    curve_tasks: int = Field(8, gt=0, description="learning-curve slice: held-out tasks per multi-step family, "
                                                  "and as many single-action ones")
    curve_samples: int = Field(2, gt=0, description="sampled episodes per slice task and curve point")
    train: dict[str, Any] = Field(default_factory=dict, description="a dojo train config over DEFAULT_TRAIN")


class DemoResult(BaseModel):
    base_success: float
    sft_success: float
    grpo_success: float
    base_greedy_success: float | None
    sft_greedy_success: float | None
    grpo_greedy_success: float | None
    held_out_tasks: int
    train_tasks: int
    eval_samples: int
    base_eval_samples: int | None = None
    condition: str
    minutes: float
    stage_minutes: dict[str, float]
    sandbox_backend: str
    rollout_engine: str
    grpo_steps: int
    first_reward: float | None
    final_reward: float | None
    out_dir: str
    report: str
    base_model: str = Field("", description="what the base policy was (shipped pretrained base, random, a path)")
    sft_pass_at_k: float | None = Field(None, description="primed policy: share of tasks solved in at least one "
                                                          "of the eval_samples sampled episodes (k = eval_samples)")
    families: dict[str, dict[str, Any]] = Field(default_factory=dict,
                                                description="held-out success per task family (gold tool), per policy")
    multistep_held_out_tasks: int = 0
    multistep_base_success: float | None = None
    multistep_sft_success: float | None = Field(None, description="primed, sampled, the multi-step families pooled")
    multistep_grpo_success: float | None = Field(None, description="after Dr. GRPO, sampled, multi-step pooled")
    multistep_sft_greedy_success: float | None = None
    multistep_grpo_greedy_success: float | None = None
    multistep_sft_pass_at_k: float | None = None
    curve: list[dict[str, Any]] = Field(default_factory=list, description="held-out slice success every "
                                                                           "curve_every steps (rl.curve.CurvePoint)")
    learning_curve: str | None = None
    target: str = ""
    target_met: bool = Field(description="see `target`")


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def base_summary(base: Path) -> dict[str, Any] | None:
    """The pretrained base's manifest numbers (None for a base without one)."""
    try:
        m = json.loads((base / "pretrain.json").read_text())
    except (OSError, ValueError):
        return None
    r, st = m["result"], m["settings"]
    return {"parameters": r["parameters"], "shape": f"hidden {st['hidden']} x {st['layers']} layers",
            "corpus": m["corpus"]["counts"], "train_tokens": r["train_tokens"], "steps": r["steps"],
            "val_loss": r["val_loss"], "tool_call_accuracy": r["tool_call_accuracy"], "hash": m["hash"][:12],
            "trained_on": m.get("device")}
