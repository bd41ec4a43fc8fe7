"""The evaluation's own process: `python -m spacy_sla.tools.ab.evaluation_process
MODEL DEV OUTPUT [--gpu-id N] [--resamples N] [--random-seed N] [--code
PATH] [--corpus config|plain]` scores one trained pipeline
(evaluation.evaluate_model) and writes OUTPUT, or, when it fails, what it
was doing beside OUTPUT (evaluation.failure_path) before the traceback
goes to the log.

An entry of its own that the package does not import: runpy runs a module
given to `-m` after importing its package, and evaluation.py is imported
by the package (the report reads its names), so running it would make
runpy warn at the top of every evaluate.log.
"""
import argparse
import json
import traceback
from pathlib import Path
from typing import Optional, Sequence

from spacy.cli._util import import_code

from ..support.files import write_atomically
from .evaluation import CONFIG_CORPUS, EVAL_CORPORA, EvaluationStep, evaluate_model, failure_path, first_line


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description="Score one trained pipeline on a dev set, for `spacy sla ab`.")
    parser.add_argument("model", type=Path)
    parser.add_argument("dev", type=Path)
    parser.add_argument("output", type=Path)
    parser.add_argument("--gpu-id", type=int, default=-1)
    parser.add_argument("--resamples", type=int, default=10000)
    parser.add_argument("--random-seed", type=int, default=0)
    parser.add_argument("--code", type=Path, default=None, help="the user's registered functions, as spacy evaluate --code")
    parser.add_argument("--corpus", choices=EVAL_CORPORA, default=CONFIG_CORPUS,
                        help="config: the pipeline's [training] dev_corpus, as spacy train; plain: spaCy's Corpus, as spacy evaluate")
    arguments = parser.parse_args(argv)
    failed = failure_path(arguments.output)
    failed.unlink(missing_ok=True)
    step = EvaluationStep()
    try:
        import_code(arguments.code)
        evaluation = evaluate_model(arguments.model, arguments.dev, gpu_id=arguments.gpu_id,
                                    resamples=arguments.resamples, random_seed=arguments.random_seed,
                                    corpus=arguments.corpus, step=step)
    except Exception as error:
        frames = [{"file": frame.filename, "line": frame.lineno, "function": frame.name}
                  for frame in traceback.extract_tb(error.__traceback__)]
        record = {"step": step.name, "corpus": {"mode": arguments.corpus, **step.corpus},
                  "error": type(error).__name__ + (f": {first_line(error)}" if str(error).strip() else ""),
                  "frames": frames}
        write_atomically(failed, json.dumps(record).encode("utf8"))
        raise  # the whole traceback goes to the log
    write_atomically(arguments.output, json.dumps(evaluation).encode("utf8"))


if __name__ == "__main__":
    main()
