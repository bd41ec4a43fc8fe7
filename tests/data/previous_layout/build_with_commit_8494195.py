import sys, json
sys.path.insert(0, "/tmp/old")
sys.path.insert(0, "/tmp/old/tests")
import numpy, spacy
import spacy_sla
assert spacy_sla.__file__.startswith("/tmp/old"), spacy_sla.__file__
from pathlib import Path
from tiny_models import save_tiny_model
from util import parsed_doc, english_vocab, add_tagger_listener
out = Path(sys.argv[1]); out.mkdir(parents=True, exist_ok=True)
model_dir = save_tiny_model(Path("/tmp/oldbuild/tiny"), "bert")
nlp = spacy.blank("en")
nlp.add_pipe("sla_transformer", name="transformer", config={"model": {"name": str(model_dir), "get_spans": {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 12, "stride": 9}}, "store_gates": True})
add_tagger_listener(nlp)
nlp.initialize()
nlp.to_disk(out / "sla-v1")
words = "the cat sat on the mat .".split()
doc = parsed_doc(nlp.vocab, words, [1, 2, 2, 2, 5, 3, 2])
doc = nlp(doc)
numpy.save(out / "sla-v1-hidden.npy", doc._.trf_data.model_output.last_hidden_state)
json.dumps
(out / "sla-v1-expected.json").write_text(json.dumps({"words": words, "heads": [1, 2, 2, 2, 5, 3, 2], "tags": [t.tag_ for t in doc], "gates": doc._.sla_gates.tolist(), "commit": "8494195"}))
print("ok", [t.tag_ for t in doc])

nlp2 = spacy.blank("en")
nlp2.add_pipe("sla_transformer", name="transformer", config={"model": {
    "@architectures": "spacy-sla.SLATransformerModel.v2", "name": str(model_dir),
    "get_spans": {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 12, "stride": 9},
    "mask": {"@misc": "spacy-sla.tree_distance_bias.v1", "max_distance": 4},
    "syntax_guided_mask": {"@misc": "spacy-sla.ancestor_mask.v1"},
    "parent_attention": {"@misc": "spacy-sla.parent_attention.v1", "layer": 1, "head": 1, "weight": 0.5},
    "on_missing_parse": "global"}})
add_tagger_listener(nlp2)
nlp2.initialize()
# make the gates and biases non-trivial so that loading them matters
import torch
with torch.no_grad():
    for name, p in nlp2.get_pipe("transformer").model.transformer.named_parameters():
        if ".local_bias." in name or ".gate." in name or name.startswith("guided_layer.mix"):
            p.copy_(torch.randn_like(p))
nlp2.to_disk(out / "v2-softbias-sgnet-lisa")
doc2 = nlp2(parsed_doc(nlp2.vocab, words, [1, 2, 2, 2, 5, 3, 2]))
numpy.save(out / "v2-softbias-sgnet-lisa-hidden.npy", doc2._.trf_data.model_output.last_hidden_state)
print("ok2")
