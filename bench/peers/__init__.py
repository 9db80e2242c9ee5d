"""Peer job queues (pgqueuer, procrastinate) run on the e2e webhook workload."""
