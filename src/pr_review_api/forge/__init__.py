"""The forge seam: which forge a change URL names (specification §17)."""
