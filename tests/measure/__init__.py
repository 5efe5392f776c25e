"""Tests of `fathom.measure`."""
