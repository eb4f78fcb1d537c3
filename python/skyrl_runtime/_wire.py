"""How Python values travel in calls: cloudpickle, with pickle protocol 5 out-of-band buffers
for numpy arrays and CPU torch tensors, so their bytes are copied once into the call (in C++)
and read in place on the other side, never element by element in Python.

A payload is one tag byte, then:
  VALUE, ERROR: the pickle.
  RETRY:        an ERROR whose exception is one the caller asked to retry for (a call's
                meta "retry_on": True for any Exception, or a tuple of classes): the
                client makes such a call again without reading it.
  BUFFERS:      u32 n, u64 pickle length, n u64 buffer lengths, the pickle, then the n buffers,
                each starting at a multiple of 64 bytes from the payload's start.
encode() returns the payload as a list of parts (the C++ side joins them); decode() reads a
bytes-like object, and the arrays and tensors it makes share its memory (a writable Blob from
the native module, so tensors come back writable)."""

import io
import pickle
import struct
import sys

import cloudpickle

VALUE, ERROR, BUFFERS, RETRY = 0, 1, 2, 3
_ALIGN = 64
_PAD = bytes(_ALIGN)


def _tensor_from(buffer, dtype, shape, requires_grad, parameter):
    import torch
    if len(buffer) == 0:
        t = torch.empty(shape, dtype=dtype)
    else:
        t = torch.frombuffer(buffer, dtype=dtype).reshape(shape)
    if parameter:
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    return t.requires_grad_(requires_grad) if requires_grad else t


class _Pickler(cloudpickle.CloudPickler):
    """cloudpickle, with dense CPU tensors reduced to a raw buffer of their bytes (what numpy
    arrays do by themselves under protocol 5)."""

    def reducer_override(self, obj):
        torch = sys.modules.get("torch")
        if (torch is not None and type(obj) in (torch.Tensor, torch.nn.Parameter) and obj.device.type == "cpu"
                and obj.layout == torch.strided and not obj.is_quantized):
            t = obj.detach().contiguous()
            raw = t.view(-1).view(torch.int16) if t.dtype == torch.bfloat16 else t.view(-1)
            try:
                array = raw.numpy()
            except (TypeError, RuntimeError):  # a dtype numpy lacks: pickled as torch does
                return super().reducer_override(obj)
            return _tensor_from, (pickle.PickleBuffer(array), t.dtype, tuple(t.shape), obj.requires_grad,
                                  type(obj) is torch.nn.Parameter)
        return super().reducer_override(obj)


# Values made only of these (in tuples, lists and dicts, a few levels deep) pickle the same with
# the C pickler as with cloudpickle, without cloudpickle's per-call set-up: the common case of
# small arguments and results (numbers, strings, bytes), about 2 us less per call on each side.
_ATOMS = frozenset({int, float, str, bytes, bool, type(None)})
_PLAIN_ITEMS = 64  # a container longer than this goes the general way (checking would cost more)


def _plain(obj, depth=3):
    t = type(obj)
    if t in _ATOMS:
        return True
    if depth == 0:
        return False
    if t is tuple or t is list:
        return len(obj) <= _PLAIN_ITEMS and all(_plain(x, depth - 1) for x in obj)
    if t is dict:
        return len(obj) <= _PLAIN_ITEMS and all(type(k) is str and _plain(v, depth - 1) for k, v in obj.items())
    return False


def encode(obj):
    """The payload of value `obj`: bytes, or a list of bytes-like parts to be joined."""
    if _plain(obj):
        return b"\x00" + pickle.dumps(obj, protocol=5)
    buffers = []
    out = io.BytesIO()
    _Pickler(out, protocol=5, buffer_callback=buffers.append).dump(obj)
    body = out.getbuffer()
    if not buffers:
        return b"\x00" + body
    views = [b.raw() for b in buffers]
    header = struct.pack(f"<BIQ{len(views)}Q", BUFFERS, len(views), len(body), *(v.nbytes for v in views))
    parts = [header, body]
    at = len(header) + len(body)
    for v in views:
        pad = -at % _ALIGN
        if pad:
            parts.append(_PAD[:pad])
        parts.append(v)
        at += pad + v.nbytes
    return parts


def decode_value(payload):
    """The value of a VALUE or BUFFERS payload (a put value inside a call's arguments)."""
    tag, value = decode(payload)
    if tag == ERROR:
        raise ValueError("decode_value: an error payload")
    return value


def encode_error(obj, retry=False):
    """The payload of an error report (pickled in-band); tagged RETRY when `retry`."""
    return (b"\x03" if retry else b"\x01") + cloudpickle.dumps(obj)


def retry_tags(retry_exceptions):
    """The tags of results a call with Ray's `retry_exceptions` makes again (the client
    reads only the first byte): RETRY, which the actor's host sets as the call's "retry_on"
    asks, when there is anything to retry for."""
    return bytes((RETRY,)) if retry_exceptions else b""


def decode(payload):
    """(tag, object) from a payload (bytes, a memoryview or a Blob)."""
    view = memoryview(payload)
    tag = view[0]
    if tag != BUFFERS:
        return (ERROR if tag == RETRY else tag), pickle.loads(view[1:])
    n, body_len = struct.unpack_from("<IQ", view, 1)
    lengths = struct.unpack_from(f"<{n}Q", view, 13)
    at = 13 + 8 * n
    body = view[at:at + body_len]
    at += body_len
    buffers = []
    for length in lengths:
        at += -at % _ALIGN
        buffers.append(view[at:at + length])
        at += length
    return VALUE, pickle.loads(body, buffers=buffers)
