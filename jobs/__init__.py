"""RQ jobs and webhook delivery."""
