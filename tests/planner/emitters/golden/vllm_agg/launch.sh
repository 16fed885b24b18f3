#!/usr/bin/env bash
# meta-llama/Llama-3.1-70B-Instruct on 8 x h200_sxm, vllm 0.33.0, agg
set -euo pipefail

cd "$(dirname "$0")"

# agg replica 0
CUDA_VISIBLE_DEVICES=0,1,2,3 vllm serve meta-llama/Llama-3.1-70B-Instruct \
    --host 127.0.0.1 \
    --port 8100 \
    --tensor-parallel-size 4 \
    --max-num-seqs 128 \
    --max-num-batched-tokens 8192 \
    --gpu-memory-utilization 0.9 \
    --kv-cache-dtype auto \
    --max-model-len 8192 \
    --max-cudagraph-capture-size 128 &

# agg replica 1
CUDA_VISIBLE_DEVICES=4,5,6,7 vllm serve meta-llama/Llama-3.1-70B-Instruct \
    --host 127.0.0.1 \
    --port 8101 \
    --tensor-parallel-size 4 \
    --max-num-seqs 128 \
    --max-num-batched-tokens 8192 \
    --gpu-memory-utilization 0.9 \
    --kv-cache-dtype auto \
    --max-model-len 8192 \
    --max-cudagraph-capture-size 128 &

# router (round robin)
vllm-router \
    --worker-urls http://127.0.0.1:8100 http://127.0.0.1:8101 \
    --policy round_robin \
    --host 127.0.0.1 \
    --port 8192 &

wait
