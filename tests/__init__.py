"""Tests of riskapi, run over HTTP against the real app."""
