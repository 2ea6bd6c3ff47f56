"""Quota as the portal stores and applies it: rules read from the database (``rules``), the cycle's locked
snapshot (``snapshot``), the changes operators and leads make (``actions``) and the decayed usage that
orders the queue by fair share (``fair_share``). The rules themselves are pure, in ``scheduling.engine.quota``."""
