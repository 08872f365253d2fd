"""The random number generators' state, as plain strings and bytes (never pickle: loading a
checkpoint must not run code)."""

import json
import random
import sys

import numpy as np

PREFIX = "primus.rng."


def capture():
    """{state key: str or bytes} for Python's random, numpy's global generator and torch's."""
    values = {}
    version, internal, gauss = random.getstate()
    values[PREFIX + "python"] = json.dumps([version, list(internal), gauss])
    name, keys, pos, has_gauss, cached = np.random.get_state()
    values[PREFIX + "numpy"] = json.dumps([name, keys.tolist(), int(pos), int(has_gauss),
                                           float(cached)])
    torch = sys.modules.get("torch")
    if torch is not None:
        values[PREFIX + "torch"] = torch.get_rng_state().numpy().tobytes()
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            for index, state in enumerate(torch.cuda.get_rng_state_all()):
                values[f"{PREFIX}torch_cuda.{index}"] = state.numpy().tobytes()
    return values


def restore(values):
    """Sets the generators from what capture() returned (keys that are absent are skipped)."""
    text = values.get(PREFIX + "python")
    if text is not None:
        version, internal, gauss = json.loads(text)
        random.setstate((version, tuple(internal), gauss))
    text = values.get(PREFIX + "numpy")
    if text is not None:
        name, keys, pos, has_gauss, cached = json.loads(text)
        np.random.set_state((name, np.array(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch = sys.modules.get("torch")
    if torch is None:
        return
    data = values.get(PREFIX + "torch")
    if data is not None:
        torch.set_rng_state(torch.frombuffer(bytearray(data), dtype=torch.uint8))
    cuda = sorted(k for k in values if k.startswith(PREFIX + "torch_cuda."))
    if cuda and torch.cuda.is_available():
        for key in cuda:
            index = int(key.rsplit(".", 1)[1])
            if index < torch.cuda.device_count():
                torch.cuda.set_rng_state(torch.frombuffer(bytearray(values[key]),
                                                          dtype=torch.uint8), index)
