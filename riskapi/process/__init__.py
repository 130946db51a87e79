"""The process entry points: the `riskapi` command line, `serve`'s supervisor and its listening sockets."""
