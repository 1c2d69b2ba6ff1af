"""Tooling for a developer's machine: console tables, the table diagnosis and its
timings, and the local Lambda control plane.

It sits below both :mod:`dynalease.cli` and :mod:`dynalease.demo`, so neither has
to import the other for them; it imports only the library faces. The tests and the
benchmarks use it too; the library itself never imports it. Like the command and
the demo it never goes in the Lambda layer.
"""
