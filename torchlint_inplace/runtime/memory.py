"""Which tensors share memory, which elements they share, and whether autograd sees it.

Views share their base's storage (and version counter); `.data` shares the storage but gets a
counter of its own, which is how a write through it escapes autograd's check. Element overlap is
computed exactly where that is cheap (a dense tensor covers its byte range) and by enumerating
element offsets for small strided ones; beyond that the byte ranges decide, which can only err
towards "overlaps".
"""

from __future__ import annotations

import torch
from torch.autograd.graph import increment_version

# Strided tensors up to this many elements have their offsets enumerated for an exact answer.
_ENUMERATE_LIMIT = 1 << 20


def storage_key(tensor: torch.Tensor) -> int | None:
    """Identity of the storage (not the tensor): every view of a base maps to the same key."""
    try:
        key: int = tensor.untyped_storage()._cdata
    except (RuntimeError, NotImplementedError, TypeError):  # no storage (sparse, nested, functional, meta wrappers)
        return None
    return key


def _span(tensor: torch.Tensor) -> tuple[int, int]:
    """First and one-past-last element offset the tensor touches in its storage (torch has no
    negative strides, so the first is the storage offset)."""
    start = int(tensor.storage_offset())  # a plain int outside symbolic tracing
    if tensor.numel() == 0:
        return start, start
    return start, start + sum(
        (size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride(), strict=True)
    ) + 1


def _offsets(tensor: torch.Tensor) -> torch.Tensor:
    offsets = torch.full((), int(tensor.storage_offset()), dtype=torch.long)
    for size, stride in zip(tensor.shape, tensor.stride(), strict=True):
        offsets = offsets.unsqueeze(-1) + torch.arange(size, dtype=torch.long) * stride
    return offsets.reshape(-1)


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether the two tensors have an element of one storage in common."""
    if a.device != b.device or storage_key(a) != storage_key(b) or storage_key(a) is None:
        return False
    if a.element_size() != b.element_size():  # a reinterpreting view: compare bytes, coarsely
        return byte_span(a)[0] < byte_span(b)[1] and byte_span(b)[0] < byte_span(a)[1]
    (a_low, a_high), (b_low, b_high) = _span(a), _span(b)
    if a_low >= b_high or b_low >= a_high:
        return False
    if a.is_contiguous() or b.is_contiguous():
        return True  # a dense tensor holds every element of its range
    if a.numel() > _ENUMERATE_LIMIT or b.numel() > _ENUMERATE_LIMIT:
        return True
    with torch.no_grad():
        return bool(torch.isin(_offsets(a), _offsets(b)).any())


def byte_span(tensor: torch.Tensor) -> tuple[int, int]:
    """First and one-past-last byte the tensor touches in its storage."""
    low, high = _span(tensor)
    return low * tensor.element_size(), high * tensor.element_size()


def same_elements(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same view of the same storage: an elementwise op reading it writes each element from itself."""
    return (
        storage_key(a) == storage_key(b)
        and a.storage_offset() == b.storage_offset()
        and a.shape == b.shape
        and a.stride() == b.stride()
        and a.dtype == b.dtype
    )


def shares_version_counter(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether a write through `a` bumps the version autograd checks on `b`: true for views and
    `.detach()`, false for `.data`. Different versions settle it; equal ones are probed by bumping
    `a`'s counter and putting it back."""
    if a._version != b._version:
        return False
    version = a._version
    increment_version(a)
    shared = b._version != version
    torch._C._autograd._unsafe_set_version_counter((a,), (version,))
    return shared
