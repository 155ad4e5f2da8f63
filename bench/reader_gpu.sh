#!/usr/bin/env bash
# The GPU steps of issue 28, one device call each (bench/results/reader_gpu.md says which, and why).
#   bash bench/reader_gpu.sh sweep     # corpus (parts carried in .carry/corpus are reused), 4 bases pretrained
#   bash bench/reader_gpu.sh prime     # each base of the sweep primed and evaluated (the demo's stages)
#   bash bench/reader_gpu.sh failures  # why multi-step episodes fail: reader vs shipped base, primed
#   bash bench/reader_gpu.sh rl NAME   # Dr. GRPO, 3 seeds, from base NAME (the demo's settings: 3 prepares
#                                      #   + 3 RL jobs fit one 10-minute call for the 0.66M base; with a
#                                      #   second variant, or the 4M base, they did not)
#        SETS="k=v k=v" TAG=t bash bench/reader_gpu.sh rl NAME   # the same with demo overrides (priming,
#                                      #   primed baseline and RL alike); the JSON is rl_budget_multistep_reader_t_gpu.json
#   ARMS="plain keyed" bash bench/reader_gpu.sh answers  # priming with each answer style (or NAME:k=v,k=v: demo
#                                      #   overrides), 3 seeds each, side by side; why each fails; teacher-forced
#                                      #   choices; each arm's primed seeds come back as one tarball
#   (answers and answers_rl: BASE=NAME picks /tmp/bases/NAME, default 0.66M, and an arm's own base=... wins;
#    SEEDS=0,1,2 the seeds)
#   STYLES="keyed+x" bash bench/reader_gpu.sh corpus  # only the corpus parts, built here and brought back
#   bash bench/reader_gpu.sh drills    # the 0.66M reader base pretrained with prose and with keyed copy drills
#                                      #   (STYLES="keyed2": two-field reads, base 0.66M_kd2; "keyed+x": keyed drills
#                                      #    and the demo's domain drilled on a foreign world, base 0.66M_kdx)
#   ARMS="keyed" bash bench/reader_gpu.sh answers_rl  # (or NAME:k=v,k=v; several arms side by side) Dr. GRPO,
#                                      #   3 seeds, from each arm's primed seeds (warm /tmp/rq, or the tarballs carried in .carry/rq)
#        (a variant with from=OTHER trains on from the policy variant OTHER trained for the seed: a warm machine keeps
#         it, so a longer run spans calls; bench/rl_budget.py)
#        (a variant with train.replay.coef > 0 replays each seed's priming traces in the loss, rl.replay;
#         seeds carried without their prime/ folder get the same traces made again, bench/_stages.replay_traces)
#        TRAIN_EVAL=K also evaluates the primed and trained policies on K training tasks per held-out family
#        KEEP=VARIANT brings each seed's VARIANT policy back with its baseline, to train on from in a later session
#   bash bench/reader_gpu.sh carry   # only unpacks KEEP's tarballs carried in .carry/rq (two seeds fit a call)
#        PHASE=prepare ... then PHASE=train ...  # two back-to-back calls (a warm machine keeps /tmp/rlb/<hash of NAME and SETS>):
#                                      #   priming + primed evaluation, then Dr. GRPO from those checkpoints
# Carry .whl and .carry. Results go to $OUT (the device tool brings them back).
set -euo pipefail
cd "$(dirname "$0")/.."
bash bench/device_setup.sh
export TOOLDOJO_CACHE=/tmp/tdcache PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p "$TOOLDOJO_CACHE/corpus" /tmp/bases
cp -rn .carry/corpus/. "$TOOLDOJO_CACHE/corpus/" 2>/dev/null || true
CORPUS=(--pretrain-set corpus.multistep_per_family=100 --pretrain-set corpus.copy_drills_per_length=100
        --pretrain-set corpus.backend=local)
SHAPES=${SHAPES:-0.66M:128x2x4,4M:256x4x4,8M:384x4x6,27M:512x8x8}
GPU=(--gpu --set sft.bf16=false --set train.model.dtype=float32)
# Tarballs come back whole up to 16 MB and in 16 MB pieces above (the device returns at most 8 files of 16 MiB):
# pack OUT/NAME.tgz TAR-ARGS... writes NAME.tgz or NAME.tgz.aa, .ab, ...; unpack DIR DEST extracts both forms.
pack() { local f=$1; shift; tar czf - "$@" | split -b 16000000 - "$f."; [ -e "$f.ab" ] || mv "$f.aa" "$f"; }
# keep NAME VARIANT (KEEP=VARIANT in answers_rl): what a fresh machine needs to train on from each seed's VARIANT
# policy of arm NAME (from=VARIANT) in a later session, its gain still over the primed policy: per seed the policy,
# the seed's prepared.json (the primed baseline) and tasks in OUT/rq_NAME_VARIANT_sS.tgz (~14.7 MB at 4M), and the
# seeds' priming traces (the replay's) in OUT/rq_NAME_prime.tgz; not the primed policy. Carried back two seeds a
# call (the 64 MiB) and unpacked by `carry` (section 43). RQ_ROOT (default /) holds tmp/rq.
keep() {
  local root=${RQ_ROOT:-/} out s; out=$(cd "$OUT" && pwd)
  for s in 0 1 2; do [ -d "$root/tmp/rq/$1/seed-$s/$2/grpo/final" ] || continue
    pack "$out/rq_$1_$2_s$s.tgz" -C "$root" --exclude='checkpoint-*' "tmp/rq/$1/seed-$s/prepared.json" \
      "tmp/rq/$1/seed-$s/tasks" "tmp/rq/$1/seed-$s/$2/grpo/final"; done
  (cd "$root" && find "tmp/rq/$1" -mindepth 2 -maxdepth 2 -type d -name prime -print0 | sort -z \
    | tar czf "$out/rq_$1_prime.tgz" --null -T -)
}
# finals: every trained policy (tmp/rq/ARM/seed-S/VARIANT/grpo/final) under RQ_ROOT (default /), NUL-separated
finals() { (cd "${RQ_ROOT:-/}" && find tmp/rq -mindepth 5 -maxdepth 5 -type d -path '*/grpo/final' -print0 | sort -z); }
# is arm $1 to be packed, of the arms "$2"? PACK="A B" names them (none: no arm); unset, every arm
packs() { [[ " ${PACK:-$2} " == *" $1 "* ]]; }
unpack() {
  for t in "$1"/*.tgz; do [ -e "$t" ] && tar xzf "$t" -C "$2" --skip-old-files; done
  for t in "$1"/*.tgz.aa; do [ -e "$t" ] && cat "${t%.aa}".* | tar xzf - -C "$2" --skip-old-files; done; return 0
}
# a warm machine still has /tmp/bases
unpack .carry/bases /tmp/bases
# An arm: NAME (answers=NAME) or NAME:k=v,k=v (demo overrides); sets SET (its --set arguments) and NAME.
arm_sets() {
  NAME=${1%%:*}; SET=()
  if [[ $1 == *:* ]]; then IFS=, read -ra kvs <<< "${1#*:}"; for kv in "${kvs[@]}"; do SET+=(--set "$kv"); done
  else SET=(--set "answers=$NAME"); fi
}
# each STYLE's corpus (STYLE+x: drill_excluded), from the parts in $TOOLDOJO_CACHE/corpus or built here (15 workers)
# RECORDS=N: N one-record reads of the foreign-world domain (corpus record_drills; base name _rN; section 32)
RS=(); PRS=(); R=""
if [ -n "${RECORDS:-}" ]; then RS=(--set "record_drills=$RECORDS"); PRS=(--pretrain-set "corpus.record_drills=$RECORDS"); R="_r$RECORDS"; fi
# WORDS=real: the foreign world's strings are real words of their kind, none of the world's (corpus foreign_words;
# base name _w; section 33)
if [ "${WORDS:-made_up}" = real ]; then RS+=(--set foreign_words=real); PRS+=(--pretrain-set corpus.foreign_words=real); R="${R}_w"; fi
# FOREIGN_ALL=1: every domain's drills on a foreign world (corpus foreign_all; base name _fa; section 33)
if [ -n "${FOREIGN_ALL:-}" ]; then RS+=(--set foreign_all=true); PRS+=(--pretrain-set corpus.foreign_all=true); R="${R}_fa"; fi
build_corpus() {
  for style in ${STYLES:-prose keyed}; do x=false; [[ $style == *+x ]] && x=true
    python3 bench/reader_corpus.py --set multistep_per_family=100 --set copy_drills_per_length=100 "${RS[@]}" \
      --set drill_style=${style%+x} --set drill_excluded=$x --cache "$TOOLDOJO_CACHE/corpus" --workers 15 --seeds "" \
      --save "$OUT/reader_corpus_${style/+/_}_gpu.json" 2>&1 | tail -1 | cut -c1-300
  done
}
case "$1" in
  corpus)
    # section 30: the parts built here, for a checkout without .carry/corpus (37 min on 2 cores); they come back
    # as one tarball, in pieces over 16 MB (unpack DIR .carry/corpus, or cat corpus_parts.tgz* | tar xz -C
    # .carry/corpus); a warm machine keeps them
    build_corpus
    pack "$OUT/corpus_parts.tgz" -C "$TOOLDOJO_CACHE/corpus" parts
    ls -la "$OUT"
    ;;
  sweep)
    python3 bench/reader_corpus.py --set multistep_per_family=100 --set copy_drills_per_length=100 \
      --cache "$TOOLDOJO_CACHE/corpus" --workers 15 --seeds "" --save "$OUT/reader_corpus_gpu.json"
    python3 bench/reader_sweep.py --device cuda --shapes "$SHAPES" "${CORPUS[@]}" \
      --pretrain-set corpus.workers=15 --pretrain-set seq_len=2048 --pretrain-set batch_size=16 \
      --max-minutes "${MINUTES:-4}" --job-timeout 420 --keep-bases /tmp/bases --out /tmp/rs \
      --save "$OUT/reader_sweep_gpu.json" 2>&1 | tee "$OUT/sweep.log"
    for d in /tmp/bases/*/; do n=$(basename "$d"); s=$(du -sm "$d" | cut -f1)
      if [ "$s" -lt 15 ]; then tar czf "$OUT/base_$n.tgz" -C /tmp/bases "$n"; fi; done
    ;;
  drills)
    # section 18: the 0.66M reader base pretrained again as in section 2 (prose copy drills) beside one whose
    # copy drills are keyed (rl.copy_drills style=keyed: asked and answered as the demo's keyed priming writes
    # pairs), both at once on the one GPU; the corpus parts built on the 2-core machine are carried in
    # .carry/corpus/parts (the transcripts are shared, each style has its own drills), so each corpus is assembled,
    # not synthesised
    # STYLES picks the drill styles (default "prose keyed"; keyed2 -> base 0.66M_kd2, section 26; STYLE+x also
    # drills the demo's domain on a foreign world, corpus drill_excluded: keyed+x -> base 0.66M_kdx, section 29)
    # DSHAPES="0.66M:128x2x4 4M:256x4x4" pretrains each style in each shape, side by side (section 35; the
    # shape's label leads the base's name: base_of keyed+x 4M -> 4M_kdx plus $R)
    base_of() { local b; case ${1%+x} in prose) b=$2 ;; keyed) b=${2}_kd ;; *) b="${2}_${1/keyed/kd}"; b=${b%+x} ;; esac
      [[ $1 == *+x ]] && b="${b}x"; echo "$b$R"; }
    build_corpus
    for style in ${STYLES:-prose keyed}; do x=false; [[ $style == *+x ]] && x=true
      for sh in ${DSHAPES:-0.66M:128x2x4}; do label=${sh%%:*}; name=$(base_of "$style" "$label")
        tag=${style/+/_}; [ "$label" = 0.66M ] || tag="${tag}_$label"
        python3 bench/reader_sweep.py --device cuda --shapes "$name:${sh#*:}" "${CORPUS[@]}" "${PRS[@]}" \
          --pretrain-set corpus.drill_style=${style%+x} --pretrain-set corpus.drill_excluded=$x \
          --pretrain-set corpus.workers=15 --pretrain-set seq_len=2048 \
          --pretrain-set batch_size=16 --max-minutes "${MINUTES:-4}" --job-timeout 480 --keep-bases /tmp/bases \
          --out "/tmp/rs_$tag" --save "$OUT/reader_sweep_drills_${tag}_gpu.json" > "/tmp/sweep_$tag.log" 2>&1 &
      done
    done
    wait
    tail -n 2 /tmp/sweep_*.log | cut -c1-600
    for style in ${STYLES:-prose keyed}; do for sh in ${DSHAPES:-0.66M:128x2x4}; do
      name=$(base_of "$style" "${sh%%:*}"); [ -d "/tmp/bases/$name" ] || continue
      pack "$OUT/base_$name.tgz" -C /tmp/bases "$name"; done; done
    ls -la "$OUT"
    ;;
  prime)
    python3 bench/reader_sweep.py --bases /tmp/bases --prime "${GPU[@]}" --threads 3 --out /tmp/rp \
      --prime-timeout "${PRIME_TIMEOUT:-540}" --save "$OUT/reader_prime_gpu.json" 2>&1 | tee "$OUT/prime.log"
    ;;
  rl)
    EXTRA=(); for kv in ${SETS:-}; do EXTRA+=(--set "$kv"); done
    python3 bench/rl_budget.py --seeds "${SEEDS:-0,1,2}" "${GPU[@]}" "${EXTRA[@]}" --set "base=/tmp/bases/$2" \
      --threads 2 --job-timeout "${RL_TIMEOUT:-290}" --workers 6 --variant demo: ${PHASE:+--out /tmp/rlb/$(echo "$2 ${SETS:-}" | md5sum | cut -c1-8)} \
      $([ "${PHASE:-}" = prepare ] && echo --prepare-only) \
      --save "$OUT/rl_budget_multistep_reader${TAG:+_$TAG}_gpu.json" 2>&1 | tee "$OUT/rl.log"
    ;;
  answers)
    # section 8/10/11: priming with each arm's settings, the arms side by side (3 seeds each, 2 threads a job on
    # the 16 cores); an arm is NAME (answers=NAME) or NAME:k=v,k=v (demo overrides); --out keeps each seed's
    # work folder. Then why each fails and, teacher-forced, which token of the answer each seed gets right
    # (bench/reader_choice.py on the seed's own tasks). The device returns at most 8 files: per arm one JSON,
    # the failures of all arms in one, the choices in one, the primed episodes in one, the seeds as tarballs.
    ARMS=${ARMS:-plain keyed}
    # tasks made on the 2-core machine, as tmp/rq/NAME/seed-S/tasks: rl.demo.make_tasks reads them back by the
    # settings that made them instead of making them again (1,000 read_report tasks take 5.5 minutes; section 38)
    unpack .carry/tasks /
    names=()
    for arm in $ARMS; do
      arm_sets "$arm"; name=$NAME; names+=("$name")
      python3 bench/rl_budget.py --seeds "${SEEDS:-0,1,2}" "${GPU[@]}" --set "base=/tmp/bases/${BASE:-0.66M}" "${SET[@]}" --threads 2 \
        --job-timeout "${RL_TIMEOUT:-480}" --workers 3 --variant demo: --out "/tmp/rq/$name" --prepare-only \
        --save "$OUT/rl_budget_multistep_reader_${name}_answers_primed_gpu.json" > "/tmp/rq_$name.log" 2>&1 &
    done
    wait
    mkdir -p /tmp/rqf /tmp/rqc
    for name in "${names[@]}"; do tail -2 "/tmp/rq_$name.log" | cut -c1-400; for s in 0 1 2; do
      OMP_NUM_THREADS=2 python3 bench/reader_choice.py --models "/tmp/rq/$name/seed-$s/sft" \
        --tasks-dir "/tmp/rq/$name/seed-$s" --work "/tmp/rc_${name}_$s" --out "/tmp/rqc/${name}_s$s.json" \
        > /dev/null 2> "/tmp/rqc_${name}_$s.log" &
      python3 bench/multistep_failures.py "/tmp/rq/$name/seed-$s/eval/sft" "/tmp/rq/$name/seed-$s/tasks/held_out" \
        --save "/tmp/rqf/${name}_s$s.json" | cut -c1-500; done; done
    wait
    tail -n 3 /tmp/rqc_*.log | cut -c1-600
    for d in rqf rqc; do
      python3 -c "import json,sys,pathlib; print(json.dumps({p.stem: json.loads(p.read_text()) for p in sorted(pathlib.Path(sys.argv[1]).glob('*.json'))}))" \
        "/tmp/$d" > "$OUT/$([ $d = rqf ] && echo multistep_failures || echo reader_choice)_reader_answers_primed_gpu.json"
    done
    # the primed policies' held-out episodes (a few hundred KB), to score them again on the CPU (bench/hedge_rescore.py)
    (cd / && find tmp/rq -path '*/eval/sft/trajectories.jsonl' -print0 \
      | tar czf "$OUT/primed_eval_trajectories.tgz" --null -T -) || true
    # each arm's primed seeds, a tarball per seed (~4 MB at 0.66M, ~15 MB at 4M), for answers_rl on a fresh machine:
    # carry them in .carry/rq, as many seeds a call as the 64 MiB tree holds (section 36). PACK="A B" packs only
    # those arms (PACK=none: no arm), so that two arms' JSONs stay inside the 8 files a call returns; PRIME=0 leaves
    # the priming traces out (the step's replay makes them again, seeded), so a 4M seed stays one piece (section 38)
    for name in "${names[@]}"; do packs "$name" "${names[*]}" || continue
      for s in 0 1 2; do [ -f "/tmp/rq/$name/seed-$s/prepared.json" ] || continue
      pack "$OUT/rq_${name}_s$s.tgz" -C / --exclude='checkpoint-*' "tmp/rq/$name/seed-$s/prepared.json" \
        "tmp/rq/$name/seed-$s/tasks" "tmp/rq/$name/seed-$s/sft" $([ "${PRIME:-1}" = 0 ] || echo "tmp/rq/$name/seed-$s/prime")
      done
    done
    ls -la "$OUT"
    ;;
  answers_rl)
    # Dr. GRPO, 3 seeds, from each arm's primed seeds (a warm /tmp/rq, or the tarballs carried in .carry/rq);
    # ARMS="A B" trains the arms side by side (the 6 workers shared); VARIANTS="demo: NAME:k=v;k=v" (no spaces
    # inside one) trains each variant from the same checkpoints. Failures of every arm, variant and seed in one JSON.
    unpack .carry/rq /
    read -ra arms <<< "${ARMS:-${ARM:-keyed}}"; names=()
    for arm in "${arms[@]}"; do
      arm_sets "$arm"; name=$NAME; names+=("$name")
      python3 bench/rl_budget.py --seeds "${SEEDS:-0,1,2}" "${GPU[@]}" --set "base=/tmp/bases/${BASE:-0.66M}" "${SET[@]}" \
        --threads "${THREADS:-2}" --job-timeout "${RL_TIMEOUT:-500}" --workers "${WORKERS:-$((6 / ${#arms[@]}))}" \
        --train-eval "${TRAIN_EVAL:-0}" $(for v in ${VARIANTS:-demo:}; do echo --variant "$v"; done) --out "/tmp/rq/$name" \
        --save "$OUT/rl_budget_multistep_reader_${name}_answers_gpu.json" > "/tmp/rl_$name.log" 2>&1 &
    done
    wait
    mkdir -p /tmp/rlf
    for name in "${names[@]}"; do tail -3 "/tmp/rl_$name.log" | cut -c1-600
      for v in ${VARIANTS:-demo:}; do v=${v%%:*}; for s in 0 1 2; do
        [ -f "/tmp/rq/$name/seed-$s/$v/eval/trajectories.jsonl" ] || continue  # a job that ran out of time
        python3 bench/multistep_failures.py "/tmp/rq/$name/seed-$s/$v/eval" "/tmp/rq/$name/seed-$s/tasks/held_out" \
          --save "/tmp/rlf/${name}_${v}_s$s.json" | cut -c1-400; done; done; done
    python3 -c "import json,sys,pathlib; print(json.dumps({p.stem: json.loads(p.read_text()) for p in sorted(pathlib.Path(sys.argv[1]).glob('*.json'))}))" \
      /tmp/rlf > "$OUT/multistep_failures_reader_answers_grpo_gpu.json"
    # every trained policy's held-out episodes and the policy itself (a few MB each at 0.66M; at 4M three seeds
    # come in 16 MB pieces, trained_policies.tgz.aa, .ab, ...: rm -f "$OUT"/trained_policies.tgz* to leave them):
    # per-entity counts and teacher-forced probes are made on the CPU afterwards
    (cd / && find tmp/rq -path '*/eval/trajectories.jsonl' -print0 \
      | tar czf "$OUT/eval_trajectories.tgz" --null -T -) || true
    if [ -z "${KEEP:-}" ]; then
      pack "$OUT/trained_policies.tgz" -C "${RQ_ROOT:-/}" --exclude='checkpoint-*' --null -T <(finals) || true
    else
      for name in "${names[@]}"; do keep "$name" "$KEEP"; done
    fi
    ls -la "$OUT"
    ;;
  carry)
    # a call that only brings seeds (KEEP's tarballs, in .carry/rq) onto the machine: the next warm call trains
    unpack .carry/rq / && finals | tr '\0' '\n'
    ;;
  failures)
    # the reader base and the shipped one, primed side by side; each multi-step failure sorted by its first wrong step
    rm -rf /tmp/fb && mkdir -p /tmp/fb && cp -r /tmp/bases/0.66M /tmp/fb/reader && cp -r rl/base /tmp/fb/shipped
    python3 bench/reader_sweep.py --bases /tmp/fb --prime "${GPU[@]}" --threads 6 --out /tmp/rf --keep \
      --prime-timeout "${PRIME_TIMEOUT:-420}" --save "$OUT/reader_prime_failures_gpu.json" 2>&1 | tail -4
    for n in reader shipped; do
      python3 bench/multistep_failures.py /tmp/rf/$n/prime/eval/sft /tmp/rf/$n/prime/tasks/held_out \
        --save "$OUT/multistep_failures_$n.json" | cut -c1-1500; done
    ;;
  *) echo "usage: $0 corpus|sweep|drills|prime|rl NAME|answers|answers_rl|carry|failures" >&2; exit 2 ;;
esac
