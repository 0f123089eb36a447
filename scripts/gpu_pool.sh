#!/usr/bin/env bash
# One call on a lent GPU machine (repo root, wheels in .whl/): `finpod bench main` at the paper's
# shape (minute100, DAYS sessions) with the population backend, TF32 matmuls and a fixed pool of each
# size in POOLS, BUDGET_S training seconds each; the dataset is generated once (--out is shared).
# Per run: phase seconds, env steps/s with learning, GPU busy share; JSON and logs under $OUT.
. "$(dirname "$0")/gpu_env.sh"
DAYS=${DAYS:-1360} BUDGET_S=${BUDGET_S:-30} LIMIT_S=${LIMIT_S:-200}
for pool in ${POOLS:-4 16}; do
  tag=fixed$pool
  echo "=== $tag $(date +%T)"
  timeout "$LIMIT_S" python3 -m finpod bench main --shape minute100 --days "$DAYS" --set device=cuda \
    --set tournament.backend=population --set tournament.budget_seconds="$BUDGET_S" \
    --set tournament.budget_env_steps=100000000000 --set tournament.cuda_matmul_precision=high \
    --set tournament.pool_schedule=fixed --set tournament.pool_size="$pool" ${EXTRA:-} \
    --out /tmp/gpu_pool --progress --json > "$OUT/$tag.json" 2> "$OUT/$tag.log"
  echo "=== $tag rc=$?"
  grep "phase\|pods" "$OUT/$tag.log" | tail -8
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print({k: d.get(k) for k in ('env_steps', 'env_steps_per_second', 'train_bench_samples_per_second', 'ratio_to_train_bench', 'evaluation_share', 'gpu_busy_percent', 'gpu_memory_mib', 'peak_rss_bytes')})" "$OUT/$tag.json"
done
