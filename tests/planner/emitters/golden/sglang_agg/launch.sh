#!/usr/bin/env bash
# meta-llama/Llama-3.1-70B-Instruct on 8 x h200_sxm, sglang 0.5.23, agg
set -euo pipefail

cd "$(dirname "$0")"

# agg replica 0
CUDA_VISIBLE_DEVICES=0,1,2,3 python -m sglang.launch_server \
    --model-path meta-llama/Llama-3.1-70B-Instruct \
    --host 127.0.0.1 \
    --port 30000 \
    --tp-size 4 \
    --max-running-requests 128 \
    --chunked-prefill-size 8192 \
    --mem-fraction-static 0.9 \
    --kv-cache-dtype auto \
    --context-length 8192 \
    --cuda-graph-max-bs-decode 128 &

# agg replica 1
CUDA_VISIBLE_DEVICES=4,5,6,7 python -m sglang.launch_server \
    --model-path meta-llama/Llama-3.1-70B-Instruct \
    --host 127.0.0.1 \
    --port 30001 \
    --tp-size 4 \
    --max-running-requests 128 \
    --chunked-prefill-size 8192 \
    --mem-fraction-static 0.9 \
    --kv-cache-dtype auto \
    --context-length 8192 \
    --cuda-graph-max-bs-decode 128 &

# router (round robin)
python -m sglang_router.launch_router \
    --worker-urls http://127.0.0.1:30000 http://127.0.0.1:30001 \
    --policy round_robin \
    --host 127.0.0.1 \
    --port 8000 &

wait
