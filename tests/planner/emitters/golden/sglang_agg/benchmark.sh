#!/usr/bin/env bash
# Replay ISL 4000 / OSL 500, concurrency 64, against launch.sh; compare with PLAN.md
set -euo pipefail

# client 0 -> 127.0.0.1:30000
python -m sglang.benchmark.serving \
    --backend sglang \
    --model meta-llama/Llama-3.1-70B-Instruct \
    --host 127.0.0.1 \
    --port 30000 \
    --dataset-name random \
    --random-input-len 4000 \
    --random-output-len 500 \
    --random-range-ratio 1.0 \
    --max-concurrency 32 \
    --num-prompts 160 &

# client 1 -> 127.0.0.1:30001
python -m sglang.benchmark.serving \
    --backend sglang \
    --model meta-llama/Llama-3.1-70B-Instruct \
    --host 127.0.0.1 \
    --port 30001 \
    --dataset-name random \
    --random-input-len 4000 \
    --random-output-len 500 \
    --random-range-ratio 1.0 \
    --max-concurrency 32 \
    --num-prompts 160 &

wait
