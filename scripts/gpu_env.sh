# Sourced by the GPU scripts (scripts/gpu_session.sh, scripts/gpu_main.sh) on a lent machine, in the
# repo's root: $OUT made, unbuffered Python, finpod's carried cp312 wheels (.whl/) installed into
# /tmp/site, and PYTHONPATH set to them, the repo and the engine.
set -u
OUT=${OUT:-/tmp/gpu_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 FINPOD_HOME=/tmp/finpod_home
if [ ! -d /tmp/site/gymnasium ] && ls .whl/*.whl >/dev/null 2>&1; then  # once per machine
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH=/tmp/site:$PWD:$PWD/engine:${PYTHONPATH:-}
