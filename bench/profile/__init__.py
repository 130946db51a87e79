"""The profiler: a workload under py-spy and where its time goes; `python -m bench.profile` runs it (__main__)."""
