"""Diagnosis: after a FAIL, the most likely root cause among the catalogued bug classes.

For every class, the law it would produce on the audited pairs and settings is computed exactly
(the full rule with that class's one change, on the pair's tables), the observed rounds are
scored under it (events: drafts, acceptance given the draft, replacement, bonus, structure; per
position and per unit) and the classes are ranked by their likelihood ratio against the target
law. A class is named only when it beats the target law by a stated margin and explains most of
the deviation (or leaves none significant on the cells); otherwise the answer is "not a known
class". Three token-by-token scorers cover what has no round tables: a failed greedy check on
raw rows (:func:`diagnose_greedy`: the deterministic law of each greedy class), units whose laws
depend on the history (:func:`diagnose_penalty`: penalty classes on rebuilt prefixes) and
black-box generators (:func:`diagnose_stream`: stream classes on rebuilt prefixes), and generators
audited against a language model's computed law (:func:`diagnose_lm`: settings not applied, drafts kept).

    from specverify.diagnosis import diagnose_audit, diagnose_rounds, CLASSES

Every class is one :class:`BugClass` record (``RECORDS``, ``CLASSES`` by name; :mod:`._classes`).
"""

from ._audit import AuditRecord, diagnose_audit
from ._classes import CLASSES, RECORDS, BugClass
from ._diagnose import NOT_KNOWN, Candidate, Diagnosis, diagnose_rounds
from ._evidence import RoundEvidence, round_evidence
from ._greedy import diagnose_greedy
from ._lm import LMStreamUnit, diagnose_lm, diagnose_request_finding, finding_explains_statistics
from ._penalty import diagnose_penalty
from ._stream import diagnose_stream

__all__ = [
    "AuditRecord",
    "diagnose_audit",
    "diagnose_rounds",
    "diagnose_greedy",
    "diagnose_lm",
    "diagnose_request_finding",
    "finding_explains_statistics",
    "LMStreamUnit",
    "diagnose_penalty",
    "diagnose_stream",
    "round_evidence",
    "Diagnosis",
    "Candidate",
    "RoundEvidence",
    "CLASSES",
    "RECORDS",
    "BugClass",
    "NOT_KNOWN",
]
