"""Which of the gate's queries the candidate can be scored on fairly: those whose text, and whose relevant
documents' texts, it never trained on.

    shared = Shared.of(candidate, spec)      # the suite's texts in the candidate's training input, by query
    kept = [q for q in queries if q not in shared.queries]
    shared.refusal(len(kept))                # why the night cannot be judged on what is left, else None

The held-out split sends a text and every copy of it to one side, but a text of one record can be the whole
text of another: a notice every page repeats, a chapter title left as a section of its own. One such text
would refuse every night for one item of a suite of hundreds; the gate leaves those queries out of the paired
test instead, counts them and names a sample in the decision row. It refuses for overlap only when the share of
shared texts says the suite leaked (`MAX_SHARED`), or when too few queries are left for the test. The texts
compared are the evaluation's own (tasks/evaluate/overlap.py: normalized, `MIN_WORDS` words or more).
"""

from __future__ import annotations

from dataclasses import dataclass

from tasks.evaluate.data import LabelledTexts, RetrievalSet, load_beir, load_stackoverflow
from tasks.evaluate.overlap import MIN_WORDS, normalize, training_input, training_texts
from tasks.evaluate.suite import DatasetSpec
from tasks.nightly.suite_files import MIN_QUERIES

MAX_SHARED = 0.05  # of the suite's distinct texts: more is a suite that leaked, not a text the corpus repeats
SAMPLE = 3  # shared texts the decision row names


@dataclass(frozen=True)
class Shared:
    """The suite's texts the candidate trained on: how many of how many (distinct), the queries they touch (by
    their row in the dataset, as the per-query values are keyed) and a sample of the texts. `texts` 0: the
    candidate's training input is unknown."""

    shared: int
    texts: int
    queries: frozenset[int] = frozenset()
    sample: tuple[str, ...] = ()

    @classmethod
    def of(cls, candidate: str, spec: DatasetSpec) -> Shared | None:
        """The suite `spec` against `candidate`'s training input; None where that input is unknown."""
        found = training_input(candidate)
        if found is None:
            return None
        trained = training_texts(found[1])
        data = load_stackoverflow(spec.path, spec.limit) if spec.kind == "stackoverflow" else load_beir(spec.path)
        return shared_texts(data, trained)

    def refusal(self, kept: int) -> str | None:
        """Why the gate cannot judge on the `kept` queries, else None."""
        if self.texts and self.shared > MAX_SHARED * self.texts:
            return (
                f"the suite shares {self.shared} of its {self.texts} texts with the candidate's training input "
                f"(more than {MAX_SHARED:.0%}: a suite that leaked)"
            )
        if kept < MIN_QUERIES:
            return (
                f"{len(self.queries)} queries share texts with the candidate's training input and {kept} are left "
                f"for the paired test ({MIN_QUERIES} needed)"
            )
        return None


def shared_texts(data: LabelledTexts | RetrievalSet, trained: set[str]) -> Shared:
    """Which texts of `data` are in `trained` (normalized training texts), and the queries they touch: a
    question whose text is one; a retrieval query whose text or a relevant document's text is one."""

    def counted(text: str) -> str | None:
        key = normalize(text)
        return key if len(key.split()) >= MIN_WORDS and key in trained else None

    if isinstance(data, LabelledTexts):
        hits = {i for i, text in enumerate(data.texts) if counted(text)}
        texts = {normalize(t) for t in data.texts}
    else:
        doc_hit = {d for d, text in enumerate(data.docs) if counted(text)}
        hits = {i for i, text in enumerate(data.queries) if counted(text) or data.relevant[i] & doc_hit}
        texts = {normalize(t) for t in (*data.queries, *data.docs)}
    shared = sorted(t for t in texts if len(t.split()) >= MIN_WORDS and t in trained)
    return Shared(len(shared), len(texts), frozenset(hits), tuple(shared[:SAMPLE]))
