"""The worker process: relay and engine together, RQ's workers and scheduler riding out outages, the embedded Redis."""
