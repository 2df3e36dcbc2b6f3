"""The forge seam: which forge a change URL names (CONTRACT 17)."""
