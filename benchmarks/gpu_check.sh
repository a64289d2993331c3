#!/bin/sh
# The GPU check (benchmarks/README.md): here `benchmarks/gpu_check.sh --prepare-wheels DIR`, there
# `benchmarks/gpu_check.sh --wheels DIR`. PYTHON picks the interpreter (default python3).
exec "${PYTHON:-python3}" "$(dirname "$0")/gpu_check.py" "$@"
