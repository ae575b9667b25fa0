"""The scalar reference, the numpy batch form and the torch form emit identical tokens
given identical uniforms, for all four rules, including uniforms at 0 and just below 1."""

import numpy as np
import torch
from hypothesis import given
from hypothesis import strategies as st

from specverify import strategies as svst
from specverify.algorithms import chain_numpy as vec
from specverify.algorithms import chain_reference as ref
from specverify.algorithms import chain_torch as tch


@st.composite
def rounds(draw):
    v = draw(st.integers(2, 8))
    gamma = draw(st.integers(1, 5))
    b = draw(st.integers(1, 4))
    P, Q, X = [], [], []
    for _ in range(b):
        prs = [draw(svst.probability_vectors(size=v)) for _ in range(gamma + 1)]
        qrs = [draw(svst.probability_vectors(size=v)) for _ in range(gamma)]
        xs = [draw(st.sampled_from([i for i in range(v) if qr[i] > 0])) for qr in qrs]
        P.append(prs), Q.append(qrs), X.append(xs)
    ua = np.array([draw(svst.uniforms(gamma)) for _ in range(b)])
    uf = np.array(draw(svst.uniforms(b)))
    ut = np.array([draw(svst.uniforms(gamma + 1)) for _ in range(b)])
    return np.array(P), np.array(Q), np.array(X, dtype=np.int64), ua, uf, ut


def _lists(tokens, n_acc):
    return [row[: n + 1].tolist() for row, n in zip(np.asarray(tokens), np.asarray(n_acc))]


@given(rounds())
def test_full_rule_three_forms_agree(r):
    P, Q, X, ua, uf, _ = r
    want = [ref.verify_chain(P[i], Q[i], X[i].tolist(), ua[i], uf[i]) for i in range(len(X))]
    assert vec.verify_chain_batch(X, Q, P, ua, uf).as_lists() == want
    t, n = tch.verify_chain_torch(*(torch.from_numpy(a) for a in (X, Q, P, ua, uf)))
    assert _lists(t, n) == want


@given(rounds())
def test_one_hot_three_forms_agree(r):
    P, Q, X, ua, uf, _ = r
    want = [ref.verify_one_hot(P[i], X[i].tolist(), ua[i], uf[i]) for i in range(len(X))]
    assert vec.verify_one_hot_batch(X, P, ua, uf).as_lists() == want
    t, n = tch.verify_one_hot_torch(*(torch.from_numpy(a) for a in (X, P, ua, uf)))
    assert _lists(t, n) == want


@given(rounds())
def test_sample_and_match_three_forms_agree(r):
    P, Q, X, _, _, ut = r
    want = [ref.verify_sample_and_match(P[i], X[i].tolist(), ut[i]) for i in range(len(X))]
    assert vec.verify_sample_and_match_batch(X, P, ut).as_lists() == want
    t, n = tch.verify_sample_and_match_torch(*(torch.from_numpy(a) for a in (X, P, ut)))
    assert _lists(t, n) == want


@given(rounds())
def test_greedy_three_forms_agree(r):
    P, Q, X, *_ = r
    want = [ref.verify_greedy(P[i], X[i].tolist()) for i in range(len(X))]
    assert vec.verify_greedy_batch(X, P).as_lists() == want
    t, n = tch.verify_greedy_torch(torch.from_numpy(X), torch.from_numpy(P))
    assert _lists(t, n) == want


@given(pq=svst.pq_pairs(max_size=6), data=st.data())
def test_acceptance_flips_exactly_at_the_ratio(pq, data):
    # Derandomised check of the acceptance boundary: accept iff u < p(x)/q(x).
    p, q = pq
    x = data.draw(st.sampled_from([i for i in range(len(q)) if q[i] > 0]))
    ratio = p[x] / q[x]
    below = np.nextafter(min(ratio, 1.0), 0.0)
    assert ref.verify_chain([p, p], [q], [x], [below], 0.5)[0] == x or below >= ratio
    if ratio < 1:
        out = ref.verify_chain([p, p], [q], [x], [ratio], 0.5)
        assert len(out) == 1 and (p[out[0]] > q[out[0]] or not any(p > q))


@given(p=svst.probability_vectors(max_size=8))
def test_inverse_cdf_maps_each_interval_to_its_token(p):
    from specverify.dists import inverse_cdf_sample_scalar

    cum = np.cumsum(p)
    for y in np.nonzero(p)[0]:
        lo = cum[y] - p[y]
        if y > 0 and p[y] > 1e-12:
            assert inverse_cdf_sample_scalar(p, lo / cum[-1] + 1e-13) == y
    assert p[inverse_cdf_sample_scalar(p, 0.0)] > 0
    assert p[inverse_cdf_sample_scalar(p, 1.0 - 2**-53)] > 0


@given(rounds())
def test_shared_row_fast_path_equals_general_path(r):
    # Same rows for every round, passed once as a broadcast view: identical tokens.
    P, Q, X, ua, uf, _ = r
    X = np.where(Q[0][np.arange(X.shape[1]), X] > 0, X, np.argmax(Q[0], axis=-1)[None, :])
    Pb = np.broadcast_to(P[:1], P.shape)
    Qb = np.broadcast_to(Q[:1], Q.shape)
    fast = vec.verify_chain_batch(X, Qb, Pb, ua, uf)
    slow = vec.verify_chain_batch(X, np.ascontiguousarray(Qb), np.ascontiguousarray(Pb), ua, uf)
    assert fast.as_lists() == slow.as_lists()


def test_zero_drafts_is_a_plain_target_step():
    p = np.array([[[0.2, 0.8]]])
    x = np.zeros((1, 0), dtype=np.int64)
    r = vec.verify_chain_batch(x, np.zeros((1, 0, 2)), p, np.zeros((1, 0)), np.array([0.5]))
    t, n = tch.verify_chain_torch(
        torch.from_numpy(x),
        torch.zeros((1, 0, 2), dtype=torch.float64),
        torch.from_numpy(p),
        torch.zeros((1, 0)),
        torch.tensor([0.5]),
    )
    assert r.as_lists() == [[1]] == [t[0, : int(n[0]) + 1].tolist()]


@given(w=st.lists(st.integers(0, 50), min_size=1, max_size=600).filter(lambda x: sum(x) > 0), us=svst.uniforms(12))
def test_two_level_inverse_cdf_agrees_in_every_form(w, us):
    # Vocabularies beyond BLOCK_ROWS exercise the two-level walk; small integer weights give ties
    # and exact zeros; uniforms include 0 and the last double below 1.
    from specverify.dists import inverse_cdf_sample, inverse_cdf_sample_many, inverse_cdf_sample_scalar
    from specverify.dists.torch_ops import _inverse_cdf_sample_torch_ops, inverse_cdf_sample_torch

    w = np.asarray(w, dtype=np.float64)
    u = np.asarray(us)
    want = [inverse_cdf_sample_scalar(w, x) for x in u]
    assert inverse_cdf_sample(np.broadcast_to(w, (len(u), len(w))), u).tolist() == want
    assert inverse_cdf_sample_many(w, u).tolist() == want
    for torch_form in (inverse_cdf_sample_torch, _inverse_cdf_sample_torch_ops):  # the CPU dispatch, the ops
        assert torch_form(torch.tensor(np.broadcast_to(w, (len(u), len(w))).copy()), torch.tensor(u)).tolist() == want
    assert all(w[t] > 0 for t in want)
