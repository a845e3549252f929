#!/usr/bin/env bash
# GPU acceptance (issue 34 item 6; issue 48: step optimizer-compute, each method's own compute on CUDA at the 1.2B
# shapes): a thin wrapper over benchmarks/gpu_acceptance.py, which says what it proves.
#   benchmarks/gpu_acceptance.sh [--dry] [--out FILE] [--backend auto|netns|local] [--only STEP]...
# PYTHON: the interpreter (default: the repo's .venv, else python3). WHEELS=DIR: first install every wheel in DIR
# (pydantic and the others a GPU image lacks; docs/testing.md says how to fetch them) into WHEELS_TARGET
# (default /tmp/distro-bench-site), offline, and put it on PYTHONPATH.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-}"
if [[ -z "$py" ]]; then
  if [[ -x "$repo/.venv/bin/python" ]]; then py="$repo/.venv/bin/python"; else py=python3; fi
fi
if [[ -n "${WHEELS:-}" ]]; then
  site="${WHEELS_TARGET:-/tmp/distro-bench-site}"
  shopt -s nullglob
  wheels=("$WHEELS"/*.whl)
  if (( ${#wheels[@]} == 0 )); then
    echo "WHEELS=$WHEELS: no .whl files there; give the folder 'pip download' filled" >&2
    exit 2
  fi
  "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "${wheels[@]}"
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
# The checkout, not an installed copy: workers inherit this path (the runner passes the environment on).
export PYTHONPATH="$repo/harness:$repo${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
exec "$py" "$repo/benchmarks/gpu_acceptance.py" "$@"
