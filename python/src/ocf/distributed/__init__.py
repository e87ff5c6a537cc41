"""Layer 5, distributed: multi-writer parts and their merge (spec/parts.md)
and the engines that drive them (torch.distributed).
"""
