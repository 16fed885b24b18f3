#!/usr/bin/env bash
# Replay ISL 4000 / OSL 500, concurrency 64, against launch.sh; compare with PLAN.md
set -euo pipefail

cd "$(dirname "$0")"

if [ -e results/latest ]; then
    echo "results/latest exists (an interrupted run?); move it away first" >&2
    exit 1
fi

mkdir -p results/latest
cp deployment.json results/latest/deployment.json

# client 0 -> 127.0.0.1:8000
python -m tensorrt_llm.serve.scripts.benchmark_serving \
    --backend openai \
    --model meta-llama/Llama-3.1-70B-Instruct \
    --host 127.0.0.1 \
    --port 8000 \
    --dataset-name random \
    --random-input-len 4000 \
    --random-output-len 500 \
    --random-prefix-len 0 \
    --max-concurrency 64 \
    --num-prompts 320 \
    --ignore-eos \
    --save-result \
    --result-dir results/latest \
    --result-filename client0.json

run="results/run-$(date -u +%Y%m%dT%H%M%SZ)"
mv results/latest "$run"
echo "results in $PWD/$run; next: planner calibrate e2e --data $PWD/results --out calibration.yaml"
