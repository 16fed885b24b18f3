#!/usr/bin/env bash
# meta-llama/Llama-3.1-70B-Instruct on 8 x h200_sxm, trtllm 1.2.0, agg
set -euo pipefail

cd "$(dirname "$0")"

# agg replica 0
CUDA_VISIBLE_DEVICES=0,1,2,3 trtllm-serve meta-llama/Llama-3.1-70B-Instruct \
    --host 127.0.0.1 \
    --port 8001 \
    --backend pytorch \
    --extra_llm_api_options trtllm-config.yaml &

# agg replica 1
CUDA_VISIBLE_DEVICES=4,5,6,7 trtllm-serve meta-llama/Llama-3.1-70B-Instruct \
    --host 127.0.0.1 \
    --port 8002 \
    --backend pytorch \
    --extra_llm_api_options trtllm-config.yaml &

wait
