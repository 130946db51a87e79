"""The soak: mixed traffic on the service while deliveries flow; `python -m bench.soak` runs it (__main__)."""
