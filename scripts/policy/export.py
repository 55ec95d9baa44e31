"""Config and export in the Hugging Face layout the engine loads (make_tiny_model.py's writer).

Every 2-D weight is stored bf16 (the engine's bf16 path), 1-D tensors (norms, the indexer's
LayerNorm bias, the router's correction bias) fp32, as make_tiny_model.py --dtype bf16 does.
`rounded_copy` gives the model with exactly the stored values: the training forward of that copy
in eval mode is what the engine computes from the export.
"""

import copy
import json
import os
import shutil
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import make_tiny_model as tiny_model  # noqa: E402

from . import model as model_lib  # noqa: E402


def make_config(dims, vocab_size):
    """config.json as a dict: make_tiny_model's (every field the engine reads, the 671B YaRN
    rope_scaling, bf16) for these dims, with the router scale and the context length given by
    dims when present."""
    config = tiny_model.make_config(dims, "v32", "bf16", vocab_size, mtp=False)
    for field in ("routed_scaling_factor", "max_position_embeddings"):
        if field in dims:
            config[field] = dims[field]
    config["indexer_rope_interleave"] = False
    return dict(sorted(config.items()))


def rounded_copy(model):
    """A copy in eval mode whose 2-D weights are rounded to bf16 (the exported values)."""
    copy_ = copy.deepcopy(model)
    with torch.no_grad():
        for p in copy_.parameters():
            if p.dim() == 2:
                p.copy_(p.to(torch.bfloat16).to(torch.float32))
    return copy_.eval()


def checkpoint_tensors(model):
    tensors = []
    for name, value in model.state_dict().items():
        array = value.detach().to(torch.float32).contiguous().numpy()
        if array.ndim == 2:
            tensors.append(tiny_model.Tensor(name, "BF16", tiny_model.to_bf16(array)))
        else:
            tensors.append(tiny_model.Tensor(name, "F32", array.astype(np.float32)))
    return tensors


def export(model, out_dir, tokenizer_files, extra_files=None):
    """Writes config.json, model.safetensors, the tokenizer files and extra_files ({name: text})
    into a temporary directory beside out_dir, then renames it into place (replacing out_dir)."""
    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".export-", dir=parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private; the model directory is not
    try:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(model.config, f, indent=2)
            f.write("\n")
        tiny_model.write_safetensors(os.path.join(tmp, "model.safetensors"), checkpoint_tensors(model))
        for path in tokenizer_files:
            shutil.copy(path, os.path.join(tmp, os.path.basename(path)))
        for name, text in (extra_files or {}).items():
            with open(os.path.join(tmp, name), "w") as f:
                f.write(text)
        if os.path.isdir(out_dir):
            old = out_dir.rstrip("/") + ".old"
            shutil.rmtree(old, ignore_errors=True)
            os.rename(out_dir, old)
            os.rename(tmp, out_dir)
            shutil.rmtree(old)
        else:
            os.rename(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def load(model_dir):
    """The exported model back as a DeepseekV32 (eval mode), read with reference_model's reader."""
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    m = model_lib.DeepseekV32(config)
    state = {}
    path = os.path.join(model_dir, "model.safetensors")
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
        blob = f.read()
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = np.frombuffer(blob[begin:end], dtype=np.uint8)
        if entry["dtype"] == "BF16":
            values = tiny_model.from_bf16(raw.view(np.uint16))
        elif entry["dtype"] == "F32":
            values = raw.view(np.float32)
        else:
            raise ValueError("%s: unsupported dtype %s" % (name, entry["dtype"]))
        state[name] = torch.from_numpy(values.reshape(entry["shape"]).copy())
    m.load_state_dict(state)
    return m.eval()
