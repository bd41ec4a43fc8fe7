"""One pipeline shared by threads, and pipelines in worker processes."""
import json
import os
import signal
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy
import pytest
from spacy.tokens import Doc

from util import sla_nlp, trf_output, varied_docs


def copy_doc(doc: Doc) -> Doc:
    return Doc(doc.vocab).from_bytes(doc.to_bytes())


def test_threads_sharing_one_pipeline_get_the_sequential_outputs(tiny_bert):
    """Each call's masks, gates and outputs belong to that call: no thread
    reads another's mask or switches another's forward pass into training
    mode."""
    nlp = sla_nlp(tiny_bert, mask={"@misc": "spacy-sla.syntax_mask.v1", "threshold": 1, "punct_rule": "none"})
    nlp.get_pipe("sla_transformer").store_gates = True
    docs = varied_docs(40)
    sequential = [nlp(copy_doc(doc)) for doc in docs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        threaded = list(pool.map(lambda doc: nlp(copy_doc(doc)), docs * 2))
    for expected, got in zip(sequential * 2, threaded):
        numpy.testing.assert_allclose(trf_output(got), trf_output(expected), atol=1e-6, rtol=0)
        numpy.testing.assert_allclose(got._.sla_gates, expected._.sla_gates, atol=1e-6, rtol=0)
    # the model is still usable for training afterwards
    assert nlp.get_pipe("sla_transformer").model.transformer is not None


# Run in a fresh interpreter, so that the parent of the workers is an
# ordinary process that has run torch with two threads before forking
# (what makes a forked worker's first parallel region hang).
PROCESSES_SCRIPT = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import torch
torch.set_num_threads(2)
import spacy
from util import add_tagger_listener, parsed_doc, sla_nlp
from util import varied_docs

nlp = sla_nlp(sys.argv[2], initialize=False)
nlp.get_pipe("sla_transformer").store_gates = True
add_tagger_listener(nlp)
nlp.initialize()
docs = varied_docs(12, seed=1)
results = {}
for n_process in (1, 2):
    processed = list(nlp.pipe(docs, n_process=n_process, batch_size=4))
    results[n_process] = {
        "tags": [[token.tag_ for token in doc] for doc in processed],
        "gates": [doc._.sla_gates.tolist() for doc in processed],
    }
print(json.dumps(results))
"""


def test_worker_processes_compute_what_one_process_computes(tiny_bert):
    """nlp.pipe(n_process=2) (also `spacy apply --n-process 2`) neither hangs
    nor changes the annotations."""
    tests = Path(__file__).parent
    process = subprocess.Popen(
        [sys.executable, "-c", PROCESSES_SCRIPT, str(tests), str(tiny_bert)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, with the workers, to stop on a hang
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        stdout, stderr = process.communicate(timeout=240)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail("nlp.pipe(n_process=2) did not finish within 240 s: the workers hang")
    assert process.returncode == 0, stderr[-3000:]
    results = json.loads(stdout.strip().splitlines()[-1])
    one, two = results["1"], results["2"]
    assert two["tags"] == one["tags"] and len(two["tags"]) == 12
    for gates_one, gates_two in zip(one["gates"], two["gates"]):
        numpy.testing.assert_allclose(numpy.array(gates_two), numpy.array(gates_one), atol=1e-5, rtol=0)
