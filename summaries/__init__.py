"""Summaries of critical participation and the rebalancing hints they drive."""
