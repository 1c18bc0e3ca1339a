"""parse_vector on any JSON-shaped answer: samples or one HostError line, never another exception."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from console.errors import HostError
from console.hosts.endpoints.prometheus import parse_vector

JSON = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=25,
)
VALUE = st.tuples(JSON, JSON).map(list) | JSON
RESULT = st.lists(st.fixed_dictionaries({"metric": JSON, "value": VALUE}) | JSON, max_size=6)


SCALAR = st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=12)
NEAR_VECTOR = st.fixed_dictionaries({"status": st.just("success"), "data": st.fixed_dictionaries({
    "resultType": st.just("vector"),
    "result": st.lists(st.fixed_dictionaries({
        "metric": st.dictionaries(st.text(max_size=6), SCALAR, max_size=3) | SCALAR,
        "value": st.tuples(SCALAR, SCALAR).map(list) | SCALAR}), max_size=6)})})


@settings(max_examples=400, deadline=None)
@given(st.one_of(JSON, NEAR_VECTOR, st.fixed_dictionaries({
    "status": st.sampled_from(["success", "error"]) | JSON,
    "data": st.fixed_dictionaries({"resultType": st.sampled_from(["vector", "matrix"]) | JSON, "result": RESULT}) | JSON,
})))
def test_any_answer(document) -> None:
    try:
        samples = parse_vector(document, "prometheus x")
    except HostError as exc:
        assert "\n" not in str(exc) and str(exc).startswith("prometheus x: ")
        return
    for sample in samples:
        assert isinstance(sample.value, float) and isinstance(sample.evaluated_at, float)
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in sample.labels.items())
