#!/usr/bin/env bash
# Replay ISL 4000 / OSL 500, concurrency 64, against launch.sh; compare with PLAN.md
set -euo pipefail

# client 0 -> 127.0.0.1:8001
python -m tensorrt_llm.serve.scripts.benchmark_serving \
    --backend openai \
    --model meta-llama/Llama-3.1-70B-Instruct \
    --host 127.0.0.1 \
    --port 8001 \
    --dataset-name random \
    --random-input-len 4000 \
    --random-output-len 500 \
    --random-prefix-len 0 \
    --max-concurrency 32 \
    --num-prompts 160 \
    --ignore-eos &

# client 1 -> 127.0.0.1:8002
python -m tensorrt_llm.serve.scripts.benchmark_serving \
    --backend openai \
    --model meta-llama/Llama-3.1-70B-Instruct \
    --host 127.0.0.1 \
    --port 8002 \
    --dataset-name random \
    --random-input-len 4000 \
    --random-output-len 500 \
    --random-prefix-len 0 \
    --max-concurrency 32 \
    --num-prompts 160 \
    --ignore-eos &

wait
