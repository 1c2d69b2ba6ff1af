"""Tooling shared by the ``dynalease`` command and the demo: console tables and the
table diagnosis.

It sits below both :mod:`dynalease.cli` and :mod:`dynalease.demo`, so neither has
to import the other for them; it imports only the library faces. Like the
command and the demo it runs on a developer's machine and never goes in the
Lambda layer.
"""
