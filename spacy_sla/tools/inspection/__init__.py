"""Looking inside an SLA pipeline: its SLA transformers' settings and gates
(trained_pipeline.py: `spacy sla info`, `spacy sla gates`), a sentence's
masks drawn (mask_views.py: `spacy sla mask`) and how much a mask restricts
over a corpus (mask_statistics.py: `spacy sla mask-stats`)."""
