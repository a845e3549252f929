#!/usr/bin/env bash
# Install distro-bench into a virtual environment (.venv): works where root `pip install` is refused
# (Debian/Ubuntu, PEP 668) and picks the torch build for this host instead of PyPI's multi-GB CUDA one.
#
#   ./install.sh            torch + the harness            then: .venv/bin/distro-bench run scenarios/home-dsl.yaml
#   ./install.sh --dev      the same + the test tools      then: .venv/bin/python -m pytest
#
# Environment:
#   TORCH=auto    (default) `cpu`, or `pypi` when `nvidia-smi -L` lists a GPU; where PyTorch's CPU
#                 index cannot be reached (only a PyPI mirror), PyPI's torch instead, saying so
#   TORCH=cpu     the CPU wheel: one your pip configuration already holds locally (find-links, a
#                 wheelhouse; no download), else PyTorch's CPU index (https://download.pytorch.org/whl/cpu);
#                 an error where that index cannot be reached
#   TORCH=cu128   a CUDA build from PyTorch's index for that CUDA version (cu126, cu128, ...: see
#                 https://pytorch.org/get-started/locally/ for the ones your driver supports)
#   TORCH=pypi    PyPI's default torch (on Linux x86_64: built for CUDA)
#   TORCH=skip    keep the torch already in the venv (install your own first)
#   VENV=.venv    where the environment goes;   PYTHON=python3   the interpreter it is made from
#   EXTRAS=...    more extras of the harness, comma-separated (e.g. EXTRAS=export)
# Assumes only python3 (>= 3.11) with venv support (Debian/Ubuntu: apt-get install python3-venv) and,
# for shaped links, iproute2. Rerunning is cheap: an existing venv and torch are kept.
set -euo pipefail
cd "$(dirname "$0")"

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
TORCH=${TORCH:-auto}
EXTRAS=${EXTRAS:-}
TORCH_SPEC='torch>=2.4'
TORCH_INDEX=https://download.pytorch.org/whl

for arg in "$@"; do
  case "$arg" in
    --dev) EXTRAS=${EXTRAS:+$EXTRAS,}dev ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "install.sh: unknown argument '$arg' (valid: --dev, --help)" >&2; exit 2 ;;
  esac
done
say() { echo "install.sh: $*"; }
die() { echo "install.sh: $*" >&2; exit 1; }

command -v "$PYTHON" >/dev/null 2>&1 || die "$PYTHON not found; install Python >= 3.11 (Debian/Ubuntu: apt-get install python3 python3-venv)"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' ||
  die "$("$PYTHON" -V 2>&1) is too old; distro-bench needs Python >= 3.11 (PYTHON=python3.12 ./install.sh picks another)"

if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV ($("$PYTHON" -V 2>&1))"
  "$PYTHON" -m venv "$VENV" 2>/tmp/install-venv.$$ || {
    cat /tmp/install-venv.$$ >&2; rm -f /tmp/install-venv.$$
    die "could not create $VENV: Python's venv support is missing (Debian/Ubuntu: apt-get install python3-venv)"; }
  rm -f /tmp/install-venv.$$
fi
PY="$VENV/bin/python"
pip() { "$PY" -m pip --disable-pip-version-check "$@"; }

TORCH_ASKED=$TORCH
if [ "$TORCH" = auto ]; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then TORCH=pypi; else TORCH=cpu; fi
fi
have_torch() { "$PY" -c 'import torch' 2>/dev/null; }
if [ "$TORCH" = skip ] || have_torch; then
  have_torch || die "TORCH=skip but $VENV has no torch; install one into it first ($PY -m pip install torch ...)"
  say "keeping torch $("$PY" -c 'import torch; print(torch.__version__)') in $VENV"
else
  case "$TORCH" in
    cpu)
      # A torch wheel that pip's own configuration already offers offline (find-links, a wheelhouse) is
      # used first: no download, and on such hosts the index may be unreachable. Its dependencies come
      # with the harness below. Otherwise the CPU wheel from PyTorch's index (~200 MB, not ~3 GB).
      if pip install -q --no-index --no-deps "$TORCH_SPEC" 2>/dev/null; then
        say "torch from a wheel in pip's configured local sources (pip config list)"
      else
        say "torch (CPU build) from $TORCH_INDEX/cpu"
        if ! pip install --retries 1 --timeout 30 "$TORCH_SPEC" --index-url "$TORCH_INDEX/cpu"; then
          # Only a PyPI mirror may be reachable (a company proxy): PyPI's torch works everywhere, larger.
          [ "$TORCH_ASKED" = auto ] || die "torch's CPU build could not be installed from $TORCH_INDEX/cpu (pip's error above); TORCH=pypi installs PyPI's torch from your configured index instead"
          say "PyTorch's CPU index could not be reached or had no torch for this host (pip's error above): installing PyPI's torch from your configured index instead (on Linux x86_64 a CUDA build, ~3 GB; TORCH=cpu insists on the CPU index, TORCH=pypi skips trying it)"
          pip install "$TORCH_SPEC"
        fi
      fi ;;
    cu[0-9]*) say "torch ($TORCH build) from $TORCH_INDEX/$TORCH"; pip install "$TORCH_SPEC" --index-url "$TORCH_INDEX/$TORCH" ;;
    pypi) say "torch from PyPI (CUDA build on Linux x86_64)"; pip install "$TORCH_SPEC" ;;
    *) die "TORCH='$TORCH' is not valid: auto, cpu, cu126, cu128 (any cuXYZ of $TORCH_INDEX), pypi or skip" ;;
  esac
fi

target=.
[ -n "$EXTRAS" ] && target=".[$EXTRAS]"
say "installing distro-bench ($target, editable) into $VENV"
pip install -q -e "$target"
"$PY" -c 'import torch, distro_bench; print("install.sh: ready: torch", torch.__version__,
  "(CUDA " + torch.version.cuda + ")" if torch.version.cuda else "(CPU)", "| distro-bench", distro_bench.__version__)' 2>/dev/null ||
  "$PY" -c 'import torch, distro_bench; print("install.sh: ready: torch", torch.__version__)'
say "next: $VENV/bin/distro-bench run scenarios/home-dsl.yaml   (as root for shaped links: sudo $VENV/bin/distro-bench ...)"
