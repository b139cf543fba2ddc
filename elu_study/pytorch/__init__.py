"""The PyTorch face: the kernels as an operator in PyTorch's dispatcher (``ops``), and ``nn.ELU``'s drop-in (``nn``)."""
