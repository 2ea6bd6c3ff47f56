"""The only code that talks to Kubernetes: client configuration, manifests and idempotent calls."""
