"""Rejection-sampling filter for SFT data, and judge-vs-state agreement (the bodies of the CLI commands).

    report = await filter_trajectories(tasks, trajs, pool=pool, config=None, judge=judge, threshold=0.5)
    write_filtered(report, "out/")     # out/trajectories.jsonl + out/sft/ (TRL format), out/scores.jsonl

**Keep rule** (APIGen-MT / Kimi K2 style): every *verifiable* component of the reward config (every
kind but `judge`; default: world_state, communication, tool_validity and the reverify hack check)
that scores must score 1.0; no component may raise a `hack:` flag; at least one verifiable
component must score. Then, when a judge is configured (`--judge-base-url`, or a `judge` component
in the config), the judge must score >= `threshold`. The judge only sees trajectories that passed
the verifiable checks (no LLM calls on rejects). A verifiable component that abstains is ignored
only when the config gives it weight 0 and it is not a gate; a gate (reverify by default) or a
weighted component (world_state, ...) that abstains leaves the trajectory unverified, and an
unverified trajectory is not kept (rewards.compose's rule). A trajectory whose decision rests on an
abstention (a gate, a weighted verifiable component, the judge, or no verifiable score at all) is
*abstained*: dropped unless `keep_abstain`.

**Agreement**: for every trajectory, "state says success" = WorldStateReward scores 1.0, and
"judge says success" = the judge scores >= threshold. Precision/recall/F1 of the judge against the
state, the confusion matrix, accuracy, Cohen's kappa and the judge's abstention rate (abstentions
and trajectories the state cannot verify are left out of the matrix and counted).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import BaseModel, Field

from rewards.base import Reward, RewardResult
from synth.episode import Trajectory
from synth.tasks import Task

Decision = Literal["kept", "rejected", "abstained"]


class Scored(BaseModel):
    task_id: str
    domain: str
    index: int                                   # position in the input trajectories
    decision: Decision
    kept: bool
    reason: str                                  # why (for a reject: the first failing component's reason)
    category: str                                # short key for the rejection table, e.g. "world_state", "hack:..."
    components: dict[str, dict[str, Any]] = Field(default_factory=dict)   # name -> {score, reason, flags}
    judge: dict[str, Any] | None = None


class FilterReport(BaseModel):
    scored: list[Scored]
    trajectories: list[Trajectory] = Field(default_factory=list, exclude=True)
    threshold: float = 0.5
    keep_abstain: bool = False
    judged: bool = False
    seconds: float = 0.0

    @property
    def kept(self) -> list[Trajectory]:
        return [self.trajectories[s.index] for s in self.scored if s.kept]

    def per_domain(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for s in self.scored:
            d = out.setdefault(s.domain, {"total": 0, "kept": 0, "rejected": 0, "abstained": 0})
            d["total"] += 1
            d[s.decision] += 1
        for d in out.values():
            d["acceptance"] = round(d["kept"] / d["total"], 4) if d["total"] else 0.0
        return dict(sorted(out.items()))

    def rejections(self) -> Counter:
        return Counter(s.category for s in self.scored if not s.kept)

    def summary(self) -> dict[str, Any]:
        n = len(self.scored)
        k = sum(s.kept for s in self.scored)
        return {"trajectories": n, "kept": k, "rejected": sum(s.decision == "rejected" for s in self.scored),
                "abstained": sum(s.decision == "abstained" for s in self.scored),
                "acceptance": round(k / n, 4) if n else 0.0, "judged": self.judged, "threshold": self.threshold,
                "keep_abstain": self.keep_abstain, "per_domain": self.per_domain(),
                "rejections": dict(self.rejections().most_common()), "seconds": round(self.seconds, 3)}


def _brief(r: RewardResult | dict[str, Any]) -> dict[str, Any]:
    d = r if isinstance(r, dict) else r.model_dump()
    return {"score": d.get("score"), "reason": d.get("reason", ""), "flags": list(d.get("flags") or [])}


def _hack(flags: Sequence[str]) -> str | None:
    return next((f for f in flags if f.startswith("hack:")), None)


def decide(components: dict[str, dict[str, Any]], kinds: dict[str, str], gates: Sequence[str],
           judge: dict[str, Any] | None, threshold: float, keep_abstain: bool,
           weights: dict[str, float] | None = None) -> tuple[Decision, str, str]:
    """(decision, reason, category) from each component's brief result; see the module docstring.
    `weights`: each component's weight in the config (None: every component is weighted)."""
    for name, c in components.items():
        flag = _hack(c["flags"])
        if flag:
            return "rejected", f"{name}: {c['reason']}", flag
    verifiable = {n: c for n, c in components.items() if kinds.get(n) != "judge"}
    for name, c in verifiable.items():
        if c["score"] is not None and c["score"] < 1.0:
            return "rejected", f"{name} {c['score']:.2f}: {c['reason']}", name
    if judge is not None and judge["score"] is not None and judge["score"] < threshold:
        return "rejected", f"judge {judge['score']:.2f} < {threshold:g}: {judge['reason']}", "judge"
    abstain: tuple[str, str] | None = None
    for g in [*gates, *(n for n in verifiable if (weights or {}).get(n, 1.0) > 0)]:
        if g in verifiable and verifiable[g]["score"] is None:
            what = "gate " if g in gates else ""
            abstain = (f"{what}{g} abstained: {verifiable[g]['reason']}", f"abstain:{g}")
            break
    if abstain is None and verifiable and all(c["score"] is None for c in verifiable.values()):
        abstain = ("no verifiable reward could score it", "abstain:verifiable")
    if abstain is None and judge is not None and judge["score"] is None:
        abstain = (f"judge abstained: {judge['reason']}", "abstain:judge")
    if abstain is not None:
        return ("kept" if keep_abstain else "abstained"), abstain[0], abstain[1]
    return "kept", "every verifiable reward passed" + (" and the judge agreed" if judge is not None else ""), "kept"


async def filter_trajectories(
    tasks: Sequence[Task],
    trajectories: Sequence[Trajectory],
    *,
    pool: Any,
    config: Any = None,
    judge: Reward | None = None,
    llm_client: Any = None,
    threshold: float = 0.5,
    keep_abstain: bool = False,
    concurrency: int = 8,
    progress: Any = None,
) -> FilterReport:
    """Score every trajectory and decide keep / reject / abstain. `config`: a RewardConfig, dict or
    YAML path (None: RewardConfig.default()); `judge`: an extra judge Reward (e.g. RubricJudge)."""
    import time

    from rewards.compose import RewardConfig, build_reward

    if config is None:
        config = RewardConfig.default()
    elif isinstance(config, (str, Path)):
        config = RewardConfig.from_yaml(config)
    elif not isinstance(config, RewardConfig):
        config = RewardConfig.model_validate(config)
    kinds = {c.name: c.kind for c in config.components}
    weights = {c.name: c.weight for c in config.components}
    # Components of kind judge run only on what the verifiable ones accept: split them off.
    verif_cfg = config.model_copy(update={"components": [c for c in config.components if c.kind != "judge"],
                                          "gate": [g for g in config.gate if kinds.get(g) != "judge"]})
    judges: dict[str, Reward] = {}
    if any(c.kind == "judge" for c in config.components):
        from rewards.compose import build_component

        judges = {c.name: build_component(c, pool=pool, llm_client=llm_client)
                  for c in config.components if c.kind == "judge"}
    if judge is not None:
        judges[getattr(judge, "name", "judge")] = judge
    composite = build_reward(verif_cfg, pool=pool, llm_client=llm_client) if verif_cfg.components else None
    by_id = {t.id: t for t in tasks}
    out: list[Scored | None] = [None] * len(trajectories)
    limiter = anyio.Semaphore(max(1, concurrency))
    start = time.perf_counter()

    async def one(i: int, traj: Trajectory) -> None:
        task = by_id.get(traj.task_id)
        if task is None:
            out[i] = Scored(task_id=traj.task_id, domain=traj.domain, index=i, decision="rejected", kept=False,
                            reason=f"no task with id {traj.task_id!r} in the tasks", category="no_task")
            return
        async with limiter:
            comps: dict[str, dict[str, Any]] = {}
            if composite is not None:
                total = await composite.score(task, traj)
                for name in composite.rewards:
                    if name in total.details:
                        comps[name] = _brief(total.details[name])
                    else:
                        comps[name] = {"score": None, "reason": "not run (gates skipped)", "flags": []}
            decision, reason, category = decide(comps, kinds, verif_cfg.gate, None, threshold, False, weights)
            jres: dict[str, Any] | None = None
            if judges and decision != "rejected":
                results = [await j.score(task, traj) for j in judges.values()]
                scores = [r.score for r in results]
                jscore = None if any(s is None for s in scores) else min(scores)
                jres = {"score": jscore, "reason": "; ".join(f"{n}: {r.reason}" for n, r in zip(judges, results, strict=True)),
                        "flags": sorted({f for r in results for f in r.flags}), "components": {
                            n: _brief(r) for n, r in zip(judges, results, strict=True)}}
                decision, reason, category = decide(comps, kinds, verif_cfg.gate, jres, threshold, keep_abstain, weights)
            elif judges:
                jres = {"score": None, "reason": "not judged: the verifiable rewards rejected it", "flags": []}
            elif decision == "abstained" and keep_abstain:
                decision = "kept"
            if jres is not None and _hack(jres["flags"]) and decision != "rejected":
                decision, reason, category = "rejected", f"judge: {jres['reason']}", _hack(jres["flags"]) or "hack"
        out[i] = Scored(task_id=traj.task_id, domain=traj.domain, index=i, decision=decision,
                        kept=decision == "kept", reason=reason, category=category, components=comps, judge=jres)
        if progress is not None:
            progress(sum(s is not None for s in out), len(out))

    async with anyio.create_task_group() as tg:
        for i, t in enumerate(trajectories):
            tg.start_soon(one, i, t)
    return FilterReport(scored=[s for s in out if s is not None], trajectories=list(trajectories),
                        threshold=threshold, keep_abstain=keep_abstain, judged=bool(judges),
                        seconds=time.perf_counter() - start)


def write_filtered(report: FilterReport, out_dir: str | Path) -> dict[str, Any]:
    """out/trajectories.jsonl + out/sft/ (synth.sft_data's TRL export of the kept trajectories),
    out/scores.jsonl (every trajectory, every component's reason), out/filter_summary.json."""
    from synth.sft_data import write_trajectories

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    export = write_trajectories(report.kept, out)
    with open(out / "scores.jsonl", "w") as f:
        for s in report.scored:
            f.write(s.model_dump_json() + "\n")
    summary = {**report.summary(), "rows": export.rows, "skipped": export.skipped, "dataset": export.dataset,
               "jsonl": export.jsonl, "scores": str(out / "scores.jsonl")}
    (out / "filter_summary.json").write_text(json.dumps(summary, indent=1))
    return summary


# ==================================================================== agreement
class AgreementReport(BaseModel):
    total: int
    compared: int
    judge_abstained: int
    state_unverified: int
    tp: int
    fp: int
    fn: int
    tn: int
    precision: float | None
    recall: float | None
    f1: float | None
    accuracy: float | None
    cohen_kappa: float | None
    abstention_rate: float
    threshold: float
    per_domain: dict[str, dict[str, int]] = Field(default_factory=dict)
    items: list[dict[str, Any]] = Field(default_factory=list)

    def confusion(self) -> dict[str, dict[str, int]]:
        return {"state_success": {"judge_success": self.tp, "judge_failure": self.fn},
                "state_failure": {"judge_success": self.fp, "judge_failure": self.tn}}


def agreement_metrics(pairs: Sequence[tuple[bool | None, bool | None]], *, threshold: float = 0.5,
                      items: list[dict[str, Any]] | None = None, domains: Sequence[str] | None = None) -> AgreementReport:
    """pairs: (state_success, judge_success) per trajectory; None = unverified / abstained."""
    tp = fp = fn = tn = ab = unv = 0
    per: dict[str, dict[str, int]] = defaultdict(lambda: {"tp": 0, "fp": 0, "fn": 0, "tn": 0, "abstained": 0,
                                                          "unverified": 0})
    for i, (state, judge) in enumerate(pairs):
        d = per[domains[i]] if domains else per["all"]
        if state is None:
            unv += 1
            d["unverified"] += 1
            continue
        if judge is None:
            ab += 1
            d["abstained"] += 1
            continue
        key = ("tp" if judge else "fn") if state else ("fp" if judge else "tn")
        d[key] += 1
        tp, fp, fn, tn = tp + (key == "tp"), fp + (key == "fp"), fn + (key == "fn"), tn + (key == "tn")
    n = tp + fp + fn + tn
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = (2 * precision * recall / (precision + recall) if precision and recall else
          (0.0 if precision is not None and recall is not None else None))
    accuracy = (tp + tn) / n if n else None
    kappa = None
    if n:
        po = (tp + tn) / n
        pe = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
        kappa = (po - pe) / (1 - pe) if pe < 1 else (1.0 if po == 1 else 0.0)
    judged = len(pairs) - unv
    r4 = lambda x: None if x is None else round(x, 4)
    return AgreementReport(total=len(pairs), compared=n, judge_abstained=ab, state_unverified=unv, tp=tp, fp=fp,
                           fn=fn, tn=tn, precision=r4(precision), recall=r4(recall), f1=r4(f1), accuracy=r4(accuracy),
                           cohen_kappa=r4(kappa), abstention_rate=round(ab / judged, 4) if judged else 0.0,
                           threshold=threshold, per_domain=dict(sorted(per.items())), items=items or [])


async def judge_agreement(tasks: Sequence[Task], trajectories: Sequence[Trajectory], *, pool: Any, judge: Reward,
                          threshold: float = 0.5, concurrency: int = 8, state: Reward | None = None) -> AgreementReport:
    """Score each trajectory with the world-state reward and the judge; compare (see the module docstring)."""
    from rewards.verifiable import WorldStateReward

    state = state or WorldStateReward(pool)
    by_id = {t.id: t for t in tasks}
    pairs: list[tuple[bool | None, bool | None]] = [(None, None)] * len(trajectories)
    items: list[dict[str, Any]] = [{}] * len(trajectories)
    limiter = anyio.Semaphore(max(1, concurrency))

    async def one(i: int, traj: Trajectory) -> None:
        task = by_id.get(traj.task_id)
        if task is None:
            items[i] = {"task_id": traj.task_id, "domain": traj.domain, "state": None, "judge": None,
                        "reason": "no such task"}
            return
        async with limiter:
            s, j = await state.score(task, traj), await judge.score(task, traj)
        st = None if s.score is None else s.score >= 1.0
        jd = None if j.score is None else j.score >= threshold
        pairs[i] = (st, jd)
        items[i] = {"task_id": traj.task_id, "domain": traj.domain, "state": st, "judge": jd,
                    "state_score": s.score, "judge_score": j.score, "state_reason": s.reason, "judge_reason": j.reason}

    async with anyio.create_task_group() as tg:
        for i, t in enumerate(trajectories):
            tg.start_soon(one, i, t)
    return agreement_metrics(pairs, threshold=threshold, items=items, domains=[t.domain for t in trajectories])
