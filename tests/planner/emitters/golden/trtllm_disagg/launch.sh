#!/usr/bin/env bash
# deepseek-ai/DeepSeek-V3 on 16 x h200_sxm, trtllm 1.2.0, disagg; set NODE_RANK on each node
set -euo pipefail

cd "$(dirname "$0")"

if [ "${NODE_RANK:-0}" = "0" ]; then
# prefill replica 0
CUDA_VISIBLE_DEVICES=0,1,2,3 DYN_SYSTEM_PORT=8001 ETCD_ENDPOINTS=http://node0:2379 python -m dynamo.trtllm \
    --model deepseek-ai/DeepSeek-V3 \
    --extra-engine-args trtllm-prefill.yaml \
    --disaggregation-mode prefill \
    --discovery-backend etcd &

# prefill replica 1
CUDA_VISIBLE_DEVICES=4,5,6,7 DYN_SYSTEM_PORT=8002 ETCD_ENDPOINTS=http://node0:2379 python -m dynamo.trtllm \
    --model deepseek-ai/DeepSeek-V3 \
    --extra-engine-args trtllm-prefill.yaml \
    --disaggregation-mode prefill \
    --discovery-backend etcd &

# Dynamo frontend (round robin)
ETCD_ENDPOINTS=http://node0:2379 python -m dynamo.frontend \
    --http-host 0.0.0.0 \
    --http-port 8000 \
    --router-mode round-robin \
    --discovery-backend etcd &
fi

if [ "${NODE_RANK:-0}" = "1" ]; then
# decode replica 0
CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 DYN_SYSTEM_PORT=8003 ETCD_ENDPOINTS=http://node0:2379 python -m dynamo.trtllm \
    --model deepseek-ai/DeepSeek-V3 \
    --extra-engine-args trtllm-decode.yaml \
    --disaggregation-mode decode \
    --discovery-backend etcd &
fi

wait
