"""REST API under /api/v1/: shared error format, the organisation endpoints and the router."""
