"""The .out variants of jitk's ops: jitk.ops.out.<symbol>(inputs...,
*, outputs...) writes into the tensors given by keyword and returns None
(torch.ops.jitk.<symbol>.out). Filled by jitk.ops._bind."""
__all__ = []
