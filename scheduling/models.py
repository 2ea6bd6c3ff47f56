"""Quotas, offerings and cluster inventory live here (see the later issues); nothing yet."""
