#!/usr/bin/env bash
# deepseek-ai/DeepSeek-V3 on 16 x h200_sxm, sglang 0.5.23, disagg; set NODE_RANK on each node
set -euo pipefail

cd "$(dirname "$0")"

if [ "${NODE_RANK:-0}" = "0" ]; then
# prefill replica 0
CUDA_VISIBLE_DEVICES=0,1,2,3 python -m sglang.launch_server \
    --model-path deepseek-ai/DeepSeek-V3 \
    --host 0.0.0.0 \
    --port 30000 \
    --tp-size 4 \
    --max-running-requests 16 \
    --chunked-prefill-size 16384 \
    --mem-fraction-static 0.9 \
    --kv-cache-dtype fp8_e4m3 \
    --context-length 10000 \
    --cuda-graph-max-bs-decode 16 \
    --disaggregation-mode prefill \
    --disaggregation-transfer-backend nixl \
    --disaggregation-bootstrap-port 8998 &

# prefill replica 1
CUDA_VISIBLE_DEVICES=4,5,6,7 python -m sglang.launch_server \
    --model-path deepseek-ai/DeepSeek-V3 \
    --host 0.0.0.0 \
    --port 30001 \
    --tp-size 4 \
    --max-running-requests 16 \
    --chunked-prefill-size 16384 \
    --mem-fraction-static 0.9 \
    --kv-cache-dtype fp8_e4m3 \
    --context-length 10000 \
    --cuda-graph-max-bs-decode 16 \
    --disaggregation-mode prefill \
    --disaggregation-transfer-backend nixl \
    --disaggregation-bootstrap-port 8999 &

# PD router
python -m sglang_router.launch_router \
    --pd-disaggregation \
    --prefill http://node0:30000 8998 \
    --prefill http://node0:30001 8999 \
    --decode http://node1:30002 \
    --policy round_robin \
    --host 0.0.0.0 \
    --port 8000 &
fi

if [ "${NODE_RANK:-0}" = "1" ]; then
# decode replica 0
CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 python -m sglang.launch_server \
    --model-path deepseek-ai/DeepSeek-V3 \
    --host 0.0.0.0 \
    --port 30002 \
    --tp-size 8 \
    --max-running-requests 2048 \
    --chunked-prefill-size 65536 \
    --mem-fraction-static 0.85 \
    --kv-cache-dtype fp8_e4m3 \
    --context-length 10000 \
    --cuda-graph-max-bs-decode 256 \
    --dp-size 8 \
    --ep-size 8 \
    --enable-dp-attention \
    --disaggregation-mode decode \
    --disaggregation-transfer-backend nixl &
fi

wait
