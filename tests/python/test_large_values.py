"""Large and binary values: arguments and results past one message (they travel in parts),
numpy arrays and torch tensors out of band (pickle protocol 5), constructor arguments of any
size, and the interpreter a worker runs Python actors with."""

import os

import numpy as np
import torch

import skyrl_runtime as ray


@ray.remote
class Store:
    def __init__(self, seed=None):
        self.seed = seed
        self.kept = None

    def keep(self, value):
        self.kept = value
        return True

    def checksum(self, t):
        return int(t.view(torch.int32).sum()), t.dtype, tuple(t.shape)

    def scaled(self, t, k):
        t.mul_(k)  # the received tensor is writable
        return t

    def seed_len(self):
        return len(self.seed)

    def same(self, value):
        return value

    def python(self):
        import sys
        return sys.executable, os.environ.get("SKYRL_TEST_WRAPPER")


def test_a_256_mib_tensor_goes_as_argument_and_comes_back_as_result(cluster):
    s = Store.remote()
    t = torch.arange(64 << 20, dtype=torch.int32)  # 256 MiB
    assert ray.get(s.checksum.remote(t)) == (int(t.sum()), torch.int32, (64 << 20,))
    back = ray.get(s.scaled.remote(t, 3))
    assert back.dtype == torch.int32 and back.shape == t.shape
    assert torch.equal(back, t * 3), "every element, through parts both ways"
    back.add_(1)  # and writable here too, without a warning
    assert int(back[0]) == 1


def test_tensors_and_arrays_of_every_kind_keep_their_values(cluster):
    s = Store.remote()
    values = [
        torch.randn(3, 5).to(torch.bfloat16),
        torch.randn(7, dtype=torch.float16),
        torch.tensor([True, False, True]),
        torch.empty(0, 4),
        torch.tensor(2.5),
        torch.randn(4, 6)[:, ::2],  # not contiguous
        torch.nn.Parameter(torch.ones(2, 2)),
        np.arange(12, dtype=np.float64).reshape(3, 4),
        {"nested": [torch.zeros(3, dtype=torch.int64), np.ones(2, dtype=np.uint8)], "n": 1},
    ]
    for v in values:
        back = ray.get(s.same.remote(v))
        if isinstance(v, torch.Tensor):
            assert type(back) is type(v) and back.dtype == v.dtype and torch.equal(back, v), v
        elif isinstance(v, np.ndarray):
            assert back.dtype == v.dtype and np.array_equal(back, v)
        else:
            assert torch.equal(back["nested"][0], v["nested"][0]) and back["n"] == 1


def test_constructor_arguments_of_any_size(cluster):
    seed = os.urandom(3 << 20)  # far over what a command line holds
    s = Store.remote(seed)
    assert ray.get(s.seed_len.remote()) == len(seed)


def test_a_worker_runs_python_actors_with_the_interpreter_it_was_given(cluster, add_worker, tmp_path):
    wrapper = tmp_path / "python-wrapper"
    wrapper.write_text("#!/bin/sh\nSKYRL_TEST_WRAPPER=yes exec /usr/bin/python3 \"$@\"\n")
    wrapper.chmod(0o755)
    add_worker("--python", str(wrapper), "--resources", "CPU=1,wrapped=1")
    s = Store.options(resources={"wrapped": 1}, num_cpus=0).remote()
    assert ray.get(s.python.remote())[1] == "yes"
    plain = Store.remote()
    assert ray.get(plain.python.remote())[1] is None


def test_a_put_value_is_serialized_once_for_every_call_that_takes_it(cluster):
    s = Store.remote()
    t = torch.arange(16 << 20, dtype=torch.int32)  # 64 MiB
    ref = ray.put(t)
    assert ray.get(ref) is t, "get() of a put gives the value itself"
    sums = ray.get([s.checksum.remote(ref) for _ in range(3)])
    assert sums == [(int(t.sum()), torch.int32, (16 << 20,))] * 3
    payload = ref._future._payload
    assert payload is not None and ray.get(s.checksum.remote(ref)) == sums[0]
    assert ref._future._payload is payload, "the same bytes for every call"

    @ray.remote
    def total(x, k):
        return int(x.sum()) * k

    assert ray.get(total.remote(ref, 2)) == int(t.sum()) * 2, "and for tasks"
