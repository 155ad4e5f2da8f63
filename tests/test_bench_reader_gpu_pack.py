"""bench/reader_gpu.sh's pack and unpack: a tarball over the device's 16 MiB return limit travels in 16 MB pieces
and comes back whole (section 35 of bench/results/reader_gpu.md: three primed 4M policies are 46 MB)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "reader_gpu.sh"


def _functions() -> str:
    text = SCRIPT.read_text()
    m = re.search(r"^pack\(\) \{.*?^unpack\(\) \{.*?^\}\n", text, re.S | re.M)
    assert m, "pack() and unpack() not found in bench/reader_gpu.sh"
    return m.group(0)


def _bash(script: str, cwd: Path) -> None:
    subprocess.run(["bash", "-euo", "pipefail", "-c", _functions() + script], cwd=cwd, check=True)


def test_large_folder_travels_in_pieces_and_comes_back_whole(tmp_path: Path) -> None:
    src = tmp_path / "src" / "seed-0"
    src.mkdir(parents=True)
    big = os.urandom(20_000_000)  # random bytes: gzip cannot shrink them under one piece
    (src / "model.bin").write_bytes(big)
    (src / "prepared.json").write_text('{"seed": 0}')
    (tmp_path / "out").mkdir()
    (tmp_path / "dest").mkdir()
    _bash("pack out/rq_x.tgz -C src seed-0 && unpack out dest", tmp_path)
    pieces = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert pieces == ["rq_x.tgz.aa", "rq_x.tgz.ab"]
    assert all((tmp_path / "out" / p).stat().st_size <= 16_000_000 for p in pieces)
    assert (tmp_path / "dest" / "seed-0" / "model.bin").read_bytes() == big
    assert (tmp_path / "dest" / "seed-0" / "prepared.json").read_text() == '{"seed": 0}'


def test_small_folder_stays_one_tarball(tmp_path: Path) -> None:
    (tmp_path / "src" / "base").mkdir(parents=True)
    (tmp_path / "src" / "base" / "config.json").write_text("{}")
    for d in ("out", "dest"):
        (tmp_path / d).mkdir()
    _bash("pack out/base_b.tgz -C src base && unpack out dest && unpack empty_dir_that_is_missing dest", tmp_path)
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["base_b.tgz"]
    assert (tmp_path / "dest" / "base" / "config.json").read_text() == "{}"


def test_pack_names_the_arms_whose_seeds_come_back(tmp_path: Path) -> None:
    # two arms' JSONs and one arm's three seeds fit the 8 files a device call returns; both arms' seeds do not
    def packed(pack: str | None) -> list[str]:
        env = {k: v for k, v in os.environ.items() if k != "PACK"} | ({} if pack is None else {"PACK": pack})
        out = subprocess.run(["bash", "-c", _functions() + 'for a in base rr1000 all1000; do '
                              'packs "$a" "base rr1000 all1000" && echo "$a"; done; true'],
                             cwd=tmp_path, env=env, check=True, capture_output=True, text=True).stdout
        return out.split()

    assert packed(None) == ["base", "rr1000", "all1000"]
    assert packed("rr1000") == ["rr1000"]
    assert packed("none") == []
    assert packed("rr") == []


def test_keep_brings_back_what_training_on_from_a_policy_needs(tmp_path: Path) -> None:
    # KEEP=v: per seed the policy v trained, the seed's primed baseline and tasks (not its primed policy nor the
    # trainer's checkpoints), and the seeds' replay traces; unpacked on a fresh machine they are where from=v looks
    arm = tmp_path / "root" / "tmp" / "rq" / "arm"
    for s in (0, 1):
        seed = arm / f"seed-{s}"
        for f, text in (("prepared.json", f'{{"seed": {s}}}'), ("tasks/train/t.json", "task"),
                        ("v/grpo/final/model.safetensors", f"policy {s}"), ("v/grpo/final/checkpoint-4/x", "ckpt"),
                        ("sft/model.safetensors", "primed"), ("prime/trajectories.jsonl", f"trace {s}"),
                        ("other/grpo/final/model.safetensors", "another variant")):
            (seed / f).parent.mkdir(parents=True, exist_ok=True)
            (seed / f).write_text(text)
    (arm / "seed-2" / "v").mkdir(parents=True)  # a seed whose job was cut: nothing of it comes back
    for d in ("out", "dest"):
        (tmp_path / d).mkdir()
    _bash(f'OUT=out RQ_ROOT={tmp_path / "root"} keep arm v && unpack out dest', tmp_path)
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["rq_arm_prime.tgz", "rq_arm_v_s0.tgz",
                                                                       "rq_arm_v_s1.tgz"]
    back = tmp_path / "dest" / "tmp" / "rq" / "arm"
    got = sorted(str(p.relative_to(back)) for p in back.rglob("*") if p.is_file())
    assert got == sorted(f"seed-{s}/{f}" for s in (0, 1) for f in (
        "prepared.json", "tasks/train/t.json", "v/grpo/final/model.safetensors", "prime/trajectories.jsonl"))
    assert (back / "seed-1" / "v" / "grpo" / "final" / "model.safetensors").read_text() == "policy 1"


def test_finals_lists_every_trained_policy_and_nothing_else(tmp_path: Path) -> None:
    # the trained policies answers_rl brings back: tmp/rq/ARM/seed-S/VARIANT/grpo/final (five folders down; the
    # listing once looked four down and came back empty), not the primed policy nor the trainer's checkpoints
    rq = tmp_path / "root" / "tmp" / "rq"
    for d in ("arm/seed-0/v/grpo/final", "arm/seed-1/v/grpo/final", "arm/seed-1/w/grpo/final",
              "arm/seed-0/v/grpo/checkpoint-4", "arm/seed-0/sft", "arm/seed-0/final", "b/seed-2/v/grpo/final"):
        (rq / d).mkdir(parents=True)
        (rq / d / "model.safetensors").write_text(d)
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", _functions() + "finals | tr '\\0' '\\n'"],
                         cwd=tmp_path, env={**os.environ, "RQ_ROOT": str(tmp_path / "root")},
                         check=True, capture_output=True, text=True).stdout.split()
    assert out == [f"tmp/rq/{d}" for d in ("arm/seed-0/v/grpo/final", "arm/seed-1/v/grpo/final",
                                           "arm/seed-1/w/grpo/final", "b/seed-2/v/grpo/final")]
    (tmp_path / "out").mkdir()
    (tmp_path / "dest").mkdir()
    _bash(f'RQ_ROOT={tmp_path / "root"}; pack out/trained_policies.tgz -C "$RQ_ROOT" --null -T <(finals) '
          '&& unpack out dest', tmp_path)
    back = tmp_path / "dest" / "tmp" / "rq"
    assert sorted(str(p.relative_to(back)) for p in back.rglob("*.safetensors")) == sorted(
        f"{d}/model.safetensors" for d in ("arm/seed-0/v/grpo/final", "arm/seed-1/v/grpo/final",
                                           "arm/seed-1/w/grpo/final", "b/seed-2/v/grpo/final"))
