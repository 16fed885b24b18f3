#!/usr/bin/env bash
# deepseek-ai/DeepSeek-V3 on 16 x h200_sxm, trtllm 1.2.0, disagg; set NODE_RANK on each node
set -euo pipefail

cd "$(dirname "$0")"

if [ "${NODE_RANK:-0}" = "0" ]; then
# prefill replica 0
CUDA_VISIBLE_DEVICES=0,1,2,3 trtllm-serve deepseek-ai/DeepSeek-V3 \
    --host 0.0.0.0 \
    --port 8001 \
    --backend pytorch \
    --extra_llm_api_options trtllm-prefill.yaml &

# prefill replica 1
CUDA_VISIBLE_DEVICES=4,5,6,7 trtllm-serve deepseek-ai/DeepSeek-V3 \
    --host 0.0.0.0 \
    --port 8002 \
    --backend pytorch \
    --extra_llm_api_options trtllm-prefill.yaml &

# disaggregated server
trtllm-serve disaggregated \
    -c disagg_config.yaml &
fi

if [ "${NODE_RANK:-0}" = "1" ]; then
# decode replica 0
CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7 trtllm-serve deepseek-ai/DeepSeek-V3 \
    --host 0.0.0.0 \
    --port 8003 \
    --backend pytorch \
    --extra_llm_api_options trtllm-decode.yaml &
fi

wait
