"""SLA / vanilla on a GPU: BERT-base-sized random weights, batch 32 x 128
pieces, mixed precision; prints time and peak-memory ratios
(spacy_sla/research/encoder_benchmark.py; docs/performance.md).

    HF_HUB_OFFLINE=1 python scripts/gpu_benchmark.py --output metrics/gpu_benchmark.json
"""
from spacy_sla.research.encoder_benchmark import main

if __name__ == "__main__":
    main()
