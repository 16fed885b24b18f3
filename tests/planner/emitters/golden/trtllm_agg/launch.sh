#!/usr/bin/env bash
# meta-llama/Llama-3.1-70B-Instruct on 8 x h200_sxm, trtllm 1.2.0, agg
set -euo pipefail

cd "$(dirname "$0")"

# agg replica 0
CUDA_VISIBLE_DEVICES=0,1,2,3 DYN_SYSTEM_PORT=8001 python -m dynamo.trtllm \
    --model meta-llama/Llama-3.1-70B-Instruct \
    --extra-engine-args trtllm-config.yaml \
    --disaggregation-mode agg \
    --discovery-backend file &

# agg replica 1
CUDA_VISIBLE_DEVICES=4,5,6,7 DYN_SYSTEM_PORT=8002 python -m dynamo.trtllm \
    --model meta-llama/Llama-3.1-70B-Instruct \
    --extra-engine-args trtllm-config.yaml \
    --disaggregation-mode agg \
    --discovery-backend file &

# Dynamo frontend (round robin)
python -m dynamo.frontend \
    --http-host 127.0.0.1 \
    --http-port 8000 \
    --router-mode round-robin \
    --discovery-backend file &

wait
