"""`check_device`: present devices pass as torch.device; malformed, foreign or absent ones are named errors."""

import pytest
import torch

from flowlab.core.validation import check_device


def test_check_device_accepts_present_devices_and_names_the_rest():
    assert check_device("cpu") == torch.device("cpu") and check_device(torch.device("cpu")).type == "cpu"
    for bad, message in [("gpu", "expected cpu, cuda"), (3.5, "expected cpu, cuda"), ("meta", "expected cpu, cuda")]:
        with pytest.raises(ValueError, match=f"device: {message}"):
            check_device(bad)
    with pytest.raises(ValueError, match=r"^backend: "):
        check_device("tpu", "backend")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device is available"):
            check_device("cuda:0")
    else:
        assert check_device("cuda").type == "cuda"
