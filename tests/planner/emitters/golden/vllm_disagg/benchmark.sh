#!/usr/bin/env bash
# Replay ISL 8000 / OSL 1000, rate 6.5 req/s, against launch.sh; compare with PLAN.md
set -euo pipefail

cd "$(dirname "$0")"

if [ -e results/latest ]; then
    echo "results/latest exists (an interrupted run?); move it away first" >&2
    exit 1
fi

mkdir -p results/latest
cp deployment.json results/latest/deployment.json

# client 0 -> node0:8192
vllm bench serve \
    --backend vllm \
    --model deepseek-ai/DeepSeek-V3 \
    --host node0 \
    --port 8192 \
    --dataset-name random \
    --random-input-len 8000 \
    --random-output-len 1000 \
    --random-range-ratio 0.0 \
    --request-rate 6.5 \
    --num-prompts 780 \
    --ignore-eos \
    --save-result \
    --result-dir results/latest \
    --result-filename client0.json

run="results/run-$(date -u +%Y%m%dT%H%M%SZ)"
mv results/latest "$run"
echo "results in $PWD/$run; next: planner calibrate e2e --data $PWD/results --out calibration.yaml"
