"""A component that kills its worker process the first time it sees a Doc
containing "CRASH" (the marker file remembers that it did): the test of a
Ray worker that dies in the middle of a shard. Loaded with
`spacy sla annotate --code`."""
import os
from pathlib import Path

from spacy.language import Language
from spacy.tokens import Doc


class CrashOnce:
    def __init__(self, marker: str):
        self.marker = Path(marker)

    def __call__(self, doc: Doc) -> Doc:
        if "CRASH" in doc.text and not self.marker.exists():
            self.marker.write_text(str(os.getpid()), encoding="utf8")
            os._exit(1)  # as a worker killed for memory: no exception, no clean-up
        return doc


@Language.factory("crash_once", default_config={"marker": ""})
def make_crash_once(nlp: Language, name: str, marker: str) -> CrashOnce:
    return CrashOnce(marker)
