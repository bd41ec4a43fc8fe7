"""Tests of spacy_sla/tools/cli, one command module each (test_<module>.py): how
every `spacy sla` command refuses what it cannot do, in one message and
exit code 1, before anything is computed or written."""
