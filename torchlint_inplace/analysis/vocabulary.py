"""The handful of names the interpreter and the pre-pass must agree on.

Everything about what ops save, write or alias comes from the table generated from torch
(`torch_facts`); these are the few facts about Python-level spellings that the table does not
carry: grad-mode context managers, tensor methods that return plain Python values, and the
initialisation helpers that write under their own `no_grad`.
"""

# Tensor methods whose result is not a tensor.
NON_TENSOR_METHODS = frozenset(
    {
        "size",
        "dim",
        "numel",
        "item",
        "tolist",
        "stride",
        "data_ptr",
        "element_size",
        "nelement",
        "is_contiguous",
        "is_floating_point",
        "is_complex",
        "get_device",
        "storage_offset",
        "ndimension",
        "untyped_storage",
        "storage",
        "numpy",
        "backward",
        "register_hook",
        "retain_grad",
        "__len__",
        "equal",
        "allclose",
    }
)
# Attributes that describe a tensor without reading its values: reading them is no read of the
# values an in-place write changed.
METADATA_ATTRIBUTES = frozenset(
    {
        "shape",
        "dtype",
        "device",
        "ndim",
        "is_cuda",
        "layout",
        "requires_grad",
        "is_leaf",
        "names",
        "itemsize",
        "nbytes",
        "grad_fn",
        "is_sparse",
    }
)
METADATA_METHODS = frozenset(
    {
        "size",
        "dim",
        "numel",
        "stride",
        "nelement",
        "ndimension",
        "element_size",
        "is_contiguous",
        "is_floating_point",
        "get_device",
        "data_ptr",
        "storage_offset",
    }
)

# Methods that read only their receiver's metadata: the metadata itself, and new tensors shaped
# like it (`x.new_empty(...)`, as `torch.empty_like(x)` reads only `x`'s metadata too).
RECEIVER_METADATA_METHODS = METADATA_METHODS | {"new_empty", "new_zeros", "new_ones", "new_full", "new_empty_strided"}
# Methods of a list or dict that add to it or drop from it without reading what it holds
# (`skips.append(y)` is no read of the tensors `skips` kept).
CONTAINER_FILLING_METHODS = frozenset({"append", "extend", "insert", "clear", "update", "setdefault"})

# `torch.FloatTensor(n)`: the typed constructors of old code, an uninitialised tensor like `torch.empty`
LEGACY_CONSTRUCTORS = frozenset(
    f"{namespace}.{kind}Tensor"
    for namespace in ("torch", "torch.cuda")
    for kind in ("", "Float", "Double", "Half", "BFloat16", "Byte", "Char", "Short", "Int", "Long", "Bool")
)
# Views whose entries share memory: a write through one lands in every entry.
EXPANDING_VIEWS = frozenset({"expand", "expand_as", "broadcast_to"})
NON_CONTIGUOUS_VIEWS = frozenset(
    {
        "transpose",
        "permute",
        "t",
        "T",
        "mT",
        "H",
        "mH",
        "movedim",
        "moveaxis",
        "swapaxes",
        "swapdims",
        "expand",
        "expand_as",
    }
)
GRAD_OFF = frozenset(
    {"torch.no_grad", "torch.inference_mode", "torch.autograd.no_grad", "torch.autograd.inference_mode"}
)
INFERENCE_MODE = frozenset({"torch.inference_mode", "torch.autograd.inference_mode"})
GRAD_ON = frozenset({"torch.enable_grad", "torch.autograd.enable_grad"})
SET_GRAD = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})
AUTOCAST = frozenset({"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast"})
# Modules whose weight autograd saves only for their input's gradient: `linear` runs as
# `addmm`/`mm`, whose derivatives save `mat2` only when `mat1` requires grad. (Convolutions and
# norms compute all their gradients in one backward that keeps the weight whatever the input.)
WEIGHT_SAVED_FOR_INPUT_GRAD = frozenset({"Linear", "LazyLinear"})
# In-place helpers that run under no_grad themselves and are meant for initialisation.
SAFE_INPLACE_PREFIXES = ("torch.nn.init.", "torch.nn.utils.")
