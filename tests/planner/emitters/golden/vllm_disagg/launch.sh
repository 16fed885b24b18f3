#!/usr/bin/env bash
# deepseek-ai/DeepSeek-V3 on 16 x h200_sxm, vllm 0.33.0, disagg; set NODE_RANK on each node
set -euo pipefail

cd "$(dirname "$0")"

if [ "${NODE_RANK:-0}" = "0" ]; then
# prefill replica 0
CUDA_VISIBLE_DEVICES=0,1,2,3 VLLM_NIXL_SIDE_CHANNEL_PORT=5600 vllm serve deepseek-ai/DeepSeek-V3 \
    --host 0.0.0.0 \
    --port 8100 \
    --tensor-parallel-size 4 \
    --max-num-seqs 16 \
    --max-num-batched-tokens 16384 \
    --gpu-memory-utilization 0.9 \
    --kv-cache-dtype fp8 \
    --max-model-len 10000 \
    --max-cudagraph-capture-size 16 \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}' &

# prefill replica 1
CUDA_VISIBLE_DEVICES=4,5,6,7 VLLM_NIXL_SIDE_CHANNEL_PORT=5601 vllm serve deepseek-ai/DeepSeek-V3 \
    --host 0.0.0.0 \
    --port 8101 \
    --tensor-parallel-size 4 \
    --max-num-seqs 16 \
    --max-num-batched-tokens 16384 \
    --gpu-memory-utilization 0.9 \
    --kv-cache-dtype fp8 \
    --max-model-len 10000 \
    --max-cudagraph-capture-size 16 \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}' &

# P/D router
vllm-router \
    --vllm-pd-disaggregation \
    --prefill http://node0:8100 \
    --prefill http://node0:8101 \
    --decode http://node1:8102 \
    --policy round_robin \
    --kv-connector nixl \
    --host 0.0.0.0 \
    --port 8192 &
fi

if [ "${NODE_RANK:-0}" = "1" ]; then
# decode replica 0
CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 VLLM_NIXL_SIDE_CHANNEL_PORT=5602 vllm serve deepseek-ai/DeepSeek-V3 \
    --host 0.0.0.0 \
    --port 8102 \
    --tensor-parallel-size 1 \
    --max-num-seqs 256 \
    --max-num-batched-tokens 8192 \
    --gpu-memory-utilization 0.85 \
    --kv-cache-dtype fp8 \
    --max-model-len 10000 \
    --max-cudagraph-capture-size 256 \
    --data-parallel-size 8 \
    --enable-expert-parallel \
    --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}' &
fi

wait
