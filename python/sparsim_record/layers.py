"""The layer table of a PyTorch model, in the format of sparsim's configs/models/*.json.

The recorded gradient is every parameter that requires a gradient, flattened in ``model.parameters()``
order (PyTorch registration order), so the table lists them in that order with ``"flatten_order":
"forward"``. Each parameter's kind comes from the module that owns it:

- convolutions (``nn.Conv1d/2d/3d``, transposed ones): ``conv`` for the weight, ``bias`` for the bias;
- ``nn.Linear`` and ``nn.Bilinear``: ``fc`` and ``bias``; the last linear module registered is the model's
  output layer: its parameters get ``"output": true``;
- ``nn.Embedding`` and ``nn.EmbeddingBag``: ``embedding``;
- normalisations (batch, instance, layer and group norms): ``norm`` for both the scale and the shift;
- recurrent layers (``nn.LSTM``, ``nn.GRU``, ``nn.RNN``): ``lstm`` for the weights, ``bias`` for the biases;
- ``nn.MultiheadAttention``'s packed input projection: ``fc`` and ``bias``.

A parameter of any other module is guessed from its name and shape (``bias`` for a name ending in
"bias", ``norm`` for other 1-D tensors, ``fc`` otherwise); the table's note lists the guessed ones.
"""

import torch
from torch import nn

_NORMS = (nn.modules.batchnorm._NormBase, nn.LayerNorm, nn.GroupNorm)
_CONVS = (nn.modules.conv._ConvNd,)
_LINEARS = (nn.Linear, nn.Bilinear)
_EMBEDDINGS = (nn.Embedding, nn.EmbeddingBag)


def _known_kind(module, local_name):
    """The kind of `module`'s own parameter `local_name`, or None for a module type not listed above."""
    is_bias = local_name.startswith("bias") or local_name.endswith("bias")
    if isinstance(module, _NORMS):
        return "norm"
    if isinstance(module, _EMBEDDINGS):
        return "embedding"
    if isinstance(module, _CONVS):
        return "bias" if is_bias else "conv"
    if isinstance(module, _LINEARS) or isinstance(module, nn.MultiheadAttention):
        return "bias" if is_bias else "fc"
    if isinstance(module, nn.RNNBase):
        return "bias" if is_bias else "lstm"
    return None


def trained_parameters(model):
    """(name, parameter) of every parameter that requires a gradient, in model.parameters() order."""
    return [(name, p) for name, p in model.named_parameters() if p.requires_grad]


def layer_table(model, name=None, compute=None):
    """The layer table of `model`'s trained parameters (a dict, written as JSON by the recorder).

    `compute` (optional) is the table's training-step object, {"forward_backward": "12.5ms", "batch": ..,
    "device": .., "method": .., "source": ..}; sparsim charges its forward_backward under
    compute.training "model".
    """
    # Which module owns each parameter, under which local name; and the last linear module.
    owner = {}
    output_module = None
    for module in model.modules():
        for local_name, p in module.named_parameters(recurse=False):
            owner.setdefault(id(p), (module, local_name))
        if isinstance(module, _LINEARS) and any(p.requires_grad for p in module.parameters(recurse=False)):
            output_module = module

    layers, guessed = [], []
    for full_name, p in trained_parameters(model):
        module, local_name = owner[id(p)]
        kind = _known_kind(module, local_name)
        if kind is None:
            kind = "bias" if full_name.endswith("bias") else "norm" if p.dim() == 1 else "fc"
            guessed.append(f"{full_name} ({type(module).__name__}: {kind})")
        layer = {"name": full_name, "size": p.numel(), "kind": kind, "shape": list(p.shape)}
        if module is output_module:
            layer["output"] = True
        layers.append(layer)
    if not layers:
        raise ValueError("the model has no parameter that requires a gradient: nothing to record")

    note = (f"Recorded by sparsim_record from a {type(model).__name__} (torch {torch.__version__}): every "
            "parameter that requires a gradient, in model.parameters() order; kinds from the owning module's type")
    if output_module is not None:
        note += "; the output layer is the last nn.Linear registered"
    if guessed:
        note += "; kinds guessed from name and shape for " + ", ".join(guessed)
    table = {
        "name": name or type(model).__name__,
        "flatten_order": "forward",
        "total": sum(layer["size"] for layer in layers),
        "note": note + ".",
        "layers": layers,
    }
    if compute is not None:
        table["compute"] = compute
    return table
