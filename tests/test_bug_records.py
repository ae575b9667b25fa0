"""Every bug class is one complete record, and every class a scorer can name has one.

A record (``specverify.diagnosis._classes.BugClass``) is complete when it states a mechanism, what
to check, at least one source, a kind of the ``Kind`` family, who names it (``Scorer``), and either
a round model whose name is the record's or, when there is none, why (another scorer names it). The
catalogue and the scorers are read independently of the records, so a sampler, a model, a token
scorer's class or an exact-check signature without a record fails here.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import types
import typing

import pytest
from user_impls.aliases import CLASS_OF

from specverify.catalogue import BUGS
from specverify.diagnosis import _audit, _greedy, _lm, _penalty, _stop, _stream, _tree
from specverify.diagnosis._classes import CLASSES, RECORDS, BugClass, Kind, Scorer, round_models

KINDS = set(typing.get_args(Kind))
SCORERS = set(typing.get_args(Scorer))


def incomplete(r: BugClass) -> list[str]:
    """What a record lacks (empty when complete)."""
    out = []
    for field in ("name", "mechanism", "check"):
        if not getattr(r, field).strip():
            out.append(f"no {field}")
    if not r.sources or not all(s.strip() for s in r.sources):
        out.append("no source (or an empty one)")
    if r.kind not in KINDS:
        out.append(f"kind {r.kind!r} is not one of {sorted(KINDS)}")
    if not r.named_by or not set(r.named_by) <= SCORERS:
        out.append(f"named_by {r.named_by!r} is not a non-empty set of {sorted(SCORERS)}")
    if r.model is None and not r.no_model_because.strip():
        out.append("neither a round model nor the reason there is none")
    if r.model is not None and r.no_model_because:
        out.append("a round model and a reason for having none")
    if (r.model is not None) != ("rounds" in r.named_by):
        out.append("the round scorer names exactly the classes with a round model")
    if r.model is not None and r.model().name != r.name:
        out.append(f"its model is named {r.model().name!r}")
    if r.sampler is not None and r.sampler.name != r.name:
        out.append(f"its sampler is named {r.sampler.name!r}")
    return out


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_every_record_is_complete(record: BugClass) -> None:
    assert not incomplete(record), incomplete(record)


@pytest.mark.parametrize(
    "blank",
    [
        {"mechanism": ""},
        {"check": " "},
        {"sources": ()},
        {"sources": ("",)},
        {"kind": "typo"},
        {"named_by": ()},
        {"model": None},
        {"name": "another_name"},
    ],
    ids=lambda b: ",".join(f"{k}={v!r}" for k, v in b.items()),
)
def test_an_incomplete_record_is_caught(blank: dict[str, object]) -> None:
    record = CLASSES["replacement_from_p"]  # a catalogue class with a round model
    assert incomplete(dataclasses.replace(record, **blank))


def test_names_are_unique() -> None:
    assert len(CLASSES) == len(RECORDS)


def test_every_catalogue_bug_has_its_record() -> None:
    for sampler in BUGS:
        assert sampler.name in CLASSES, sampler.name
        assert CLASSES[sampler.name].sampler is sampler, sampler.name
    with_sampler = {r.name for r in RECORDS if r.sampler is not None}
    assert with_sampler == {b.name for b in BUGS}


def _laws_named_in(module: types.ModuleType) -> set[str]:
    """The classes a token scorer builds a law for (``laws["name"] = ...``), the target aside."""
    return set(re.findall(r'laws\["(\w+)"\]', inspect.getsource(module))) - {"target"}


def _named_by_scorers() -> dict[str, set[str]]:
    """{scorer: the classes its module can name}, read from the scorer modules themselves."""
    out = {
        "rounds": {m.name for m in round_models()[1:]},
        "greedy": _laws_named_in(_greedy),
        "penalty": set(_penalty._FACTS) | set(_penalty._ORDERS),
        "stream": _laws_named_in(_stream),
        "tree": _laws_named_in(_tree),
        "lm": set(_lm.LM_FACTS),
        "exact/request": set(_lm.REQUEST_SIGNATURES),
        "stop": set(_stop.STOP_FACTS),
        "serial": {_audit._SERIAL_SIGNATURE[0]},
    }
    for check_id, (name, _fact) in _audit._EXACT_SIGNATURES.items():
        out.setdefault(check_id, set()).add(name)
    return out


def test_every_class_a_scorer_can_name_has_a_record_that_says_so() -> None:
    named = _named_by_scorers()
    assert set(named) == SCORERS, "a scorer without a Scorer name, or a Scorer no module names"
    for scorer, names in named.items():
        assert names, scorer
        missing = sorted(n for n in names if n not in CLASSES)
        assert not missing, (scorer, missing)
        unstated = sorted(n for n in names if scorer not in CLASSES[n].named_by)
        assert not unstated, (scorer, unstated)
    for r in RECORDS:  # and no record claims a scorer that cannot name it
        claimed = sorted(s for s in r.named_by if r.name not in named[s])
        assert not claimed, (r.name, claimed)


def test_the_round_models_are_the_records_models_in_record_order() -> None:
    models = round_models()
    assert models[0].name == "target"
    assert [m.name for m in models[1:]] == [r.name for r in RECORDS if r.model is not None]
    assert all(a is not b for a, b in zip(models, round_models())), "models are fresh per diagnosis"


def test_every_user_suite_alias_names_a_record() -> None:
    missing = sorted(v for v in CLASS_OF.values() if v not in CLASSES)
    assert not missing, missing
