#!/usr/bin/env bash
# One call on a lent GPU machine (repo root; finpod's dependencies and py-spy as cp312 wheels in
# .whl/, see scripts/gpu_session.sh): the CUDA correctness tests, a population round's profile, then
# `finpod bench main` at the paper's shape under py-spy (every thread's Python stacks, 50 a second),
# so the host time of each phase can be read back here:
#   python scripts/spy_phases.py $OUT/main_fp32.spy.gz         (collapsed stacks -> seconds by phase/frame)
# Knobs: DAYS (340), BUDGET_S (45), POOL (4), LIMIT_S (300 a run), PARTS (smi tests profile main),
# VARIANTS (below), EXTRA (flags for every main run).
. "$(dirname "$0")/gpu_env.sh"
DAYS=${DAYS:-340} BUDGET_S=${BUDGET_S:-45} POOL=${POOL:-4} LIMIT_S=${LIMIT_S:-300}
PARTS=${PARTS:-"smi tests profile main"}
want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
stamp() { echo "=== $* $(date +%T)"; }
if want smi; then
  nvidia-smi -L; nproc
  python3 -c "import torch, finpod.cli, gymnasium, pydantic, exchange_calendars, empyrical, alpaca, pyfolio; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name())"
fi
if want tests; then
  stamp tests
  PODRACER_TEST_DEVICE=cuda timeout 120 python3 -m pytest -q -p no:cacheprovider -W ignore \
    tests/engine/test_population.py 2>&1 | tail -6
  timeout 150 python3 -m pytest -q -p no:cacheprovider -W ignore -k "cuda or graph" \
    tests/app/test_policy_pass.py tests/env/test_template_rows.py tests/app/test_graphed_collect.py 2>&1 | tail -6
fi
if want profile; then
  stamp profile
  timeout 120 python3 scripts/gpu_bench.py population_profile --pods "$POOL" --pod-envs 1024 --policy mlp 2>&1 \
    | grep -E "^population_profile" | head -16
fi
# Main runs, "name:words" with "+" for spaces; a word NAME=VALUE sets an environment variable, the
# rest are flags (default: fp32; TF32 matmuls; TF32 with the collection eager, for comparison: it is
# graphed by default on CUDA). The runs share --out, so the dataset is generated once.
VARIANTS=${VARIANTS:-"fp32: tf32:--set+tournament.cuda_matmul_precision=high eager:PODRACER_GRAPHED_COLLECT=0+--set+tournament.cuda_matmul_precision=high"}
if want main; then
  spy=${SPY:-/tmp/site/bin/py-spy}
  for variant in $VARIANTS; do
    name=${variant%%:*} extra=${variant#*:}
    extra=${extra//+/ }  # "--set+a.b=c" -> "--set a.b=c" (no spaces inside a variant)
    assignments=() flags=()
    for word in $extra; do
      case $word in --*|*.*=*) flags+=("$word") ;; *=*) assignments+=("$word") ;; *) flags+=("$word") ;; esac
    done
    stamp "main $name ($extra)"
    timeout -s INT -k 20 "$LIMIT_S" "$spy" record --rate 50 --threads --idle --subprocesses --format raw --output "$OUT/main_$name.spy" -- \
      env "${assignments[@]}" python3 -m finpod bench main --shape minute100 --days "$DAYS" --set device="${DEVICE:-cuda}" \
      --set tournament.backend=population --set tournament.budget_seconds="$BUDGET_S" \
      --set tournament.budget_env_steps=100000000000 --set tournament.pool_schedule=fixed \
      --set tournament.pool_size="$POOL" "${flags[@]}" ${EXTRA:-} --out /tmp/gpu_spy_runs --progress --json > "$OUT/main_$name.json" 2> "$OUT/main_$name.log"
    stamp "main $name rc=$?"
    grep -E "phase" "$OUT/main_$name.log" | tail -6
    python3 -c "import json,sys; t=open(sys.argv[1]).read(); d=json.JSONDecoder().raw_decode(t[t.index('{'):])[0]; print({k: d.get(k) for k in ('phase_seconds', 'env_steps', 'env_steps_per_second', 'train_bench_samples_per_second', 'ratio_to_train_bench', 'evaluation_share', 'gpu_busy_percent', 'gpu_memory_mib', 'peak_rss_bytes')})" "$OUT/main_$name.json"
    gzip -f "$OUT/main_$name.spy"
  done
fi
