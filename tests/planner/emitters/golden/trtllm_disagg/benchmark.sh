#!/usr/bin/env bash
# Replay ISL 8000 / OSL 1000, rate 6.5 req/s, against launch.sh; compare with PLAN.md
set -euo pipefail

# client 0 -> 127.0.0.1:8000
python -m tensorrt_llm.serve.scripts.benchmark_serving \
    --backend openai \
    --model deepseek-ai/DeepSeek-V3 \
    --host 127.0.0.1 \
    --port 8000 \
    --dataset-name random \
    --random-input-len 8000 \
    --random-output-len 1000 \
    --random-prefix-len 0 \
    --request-rate 6.5 \
    --num-prompts 780 \
    --ignore-eos
