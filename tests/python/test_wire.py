"""The call payloads (_wire): small plain values take the C pickler directly, everything else
cloudpickle with out-of-band buffers; both decode to the value sent."""

import enum
import pickle

import numpy as np

from skyrl_runtime import _wire


class Color(enum.IntEnum):
    RED = 1


def test_plain_values_are_one_tag_byte_and_a_plain_pickle():
    for value in [7, 2.5, "text", b"bytes", None, True, ((1, "a"), {"k": [1, 2, {"n": None}]}), ((), {})]:
        payload = _wire.encode(value)
        assert isinstance(payload, bytes)
        assert payload == b"\x00" + pickle.dumps(value, protocol=5)
        assert _wire.decode(payload) == (_wire.VALUE, value)


def test_other_values_go_through_cloudpickle_and_keep_their_types():
    def local(x):
        return x + 1

    big = list(range(1000))  # longer than the plain check looks at
    deep = [[[[[1]]]]]
    array = np.arange(10)
    for value in [Color.RED, (local,), big, deep, {1: "int key"}, array]:
        payload = _wire.encode(value)
        data = payload if isinstance(payload, bytes) else b"".join(payload)
        tag, out = _wire.decode(data)
        assert tag == _wire.VALUE
        if value is array:
            assert np.array_equal(out, array)
        elif isinstance(value, tuple):
            assert out[0](1) == 2, "a local function, pickled by value"
        else:
            assert out == value and type(out) is type(value)
    assert type(_wire.decode(_wire.encode(Color.RED))[1]) is Color, "an int subclass stays itself"
