"""The names the `flowlab vision dsa` options list (light: imported by the CLI before torch)."""

#: the head types of the profiling vote, in the order of their integer codes (0 = spatial, 1 = temporal)
HEAD_TYPES = ("spatial", "temporal")
#: the orders DSA runs its spatial and temporal work in: one after the other, or overlapped by the cost model's rule
SCHEDULES = ("naive", "dynamic")
#: how an all-to-all is carried out: the backend's own collective, or paired point-to-point sends and receives
ALL_TO_ALL = ("native", "p2p")
#: torch.distributed backends: gloo on CPU processes, NCCL on GPUs
BACKENDS = ("gloo", "nccl")
#: the distributed attentions compared in the communication table
METHODS = ("dsa", "ring", "ulysses", "usp")
