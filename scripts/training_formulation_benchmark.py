"""A training step of a config's vanilla and SLA pipelines, SLA through
TwoBranchAttention and through two SDPA calls, side by side
(spacy_sla/research/formulation_benchmark.py; docs/performance.md).

    HF_HUB_OFFLINE=1 python scripts/training_formulation_benchmark.py docs/ab/conll2003-ner/ner.cfg \
        corpus/conll2003-docs/train.spacy --n-docs 64 --model training/minilm
"""
from spacy_sla.research.formulation_benchmark import main

if __name__ == "__main__":
    main()
