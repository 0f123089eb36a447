#!/usr/bin/env bash
# One call on a lent GPU machine (repo root; finpod's dependencies as cp312 wheels in .whl/, see
# scripts/gpu_session.sh): `finpod bench main` on the paper's shape (minute100) with the population
# backend, then with the thread pool (`local`), each bounded; JSON results and progress logs under $OUT.
#   DAYS (1360), BUDGET_S (training seconds, 60), DEVICE (cuda), BACKENDS ("population local")
. "$(dirname "$0")/gpu_env.sh"
PY=${PY:-python3}
DAYS=${DAYS:-1360} BUDGET_S=${BUDGET_S:-60} DEVICE=${DEVICE:-cuda}
nvidia-smi -L 2>/dev/null; nproc
if [ -n "${TESTS:-}" ]; then  # the CUDA-graph policy pass equals the eager loop
  timeout 90 $PY -m pytest -q -p no:cacheprovider -W ignore $TESTS 2>&1 | tail -8
fi
for backend in ${BACKENDS:-population local}; do
  limit=${LIMIT_S:-300}
  echo "=== main $backend (days $DAYS, budget $BUDGET_S s, limit $limit s) $(date +%T)"
  began=$(date +%s)
  timeout "$limit" $PY -m finpod bench main --shape minute100 --days "$DAYS" --set device="$DEVICE" \
    --set tournament.backend="$backend" --set tournament.budget_seconds="$BUDGET_S" ${EXTRA:-} \
    --progress --json > "$OUT/main_$backend.json" 2> "$OUT/main_$backend.log"
  echo "=== main $backend rc=$? $(( $(date +%s) - began )) s"
  grep -v gpu_timeline -A0 "$OUT/main_$backend.json" | head -c 1500; tail -5 "$OUT/main_$backend.log"
done
